import os
import os.path as osp

import pytest

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
SHARED_DATA = os.environ.get('MMVISATTN_SHARED_DATA',
                             osp.join(REPO, '..', 'shared', 'data'))


def shared_dataset(name):
    """Path of a dataset in ../shared/data, or skip the test with the reason."""
    path = osp.join(SHARED_DATA, name)
    if not osp.isdir(path):
        pytest.skip(f'{path} is absent (set MMVISATTN_SHARED_DATA to the '
                    'folder holding coco128/camvid_ade)')
    return path


@pytest.fixture(autouse=True)
def _restore_default_scope():
    """Undo registry default scopes a test sets (e.g. mmdet's
    ``register_all_modules()``), so the next test builds in its own scope:
    an mmdet scope left behind makes mmpretrain's ImageClassifier look up
    ``ClsDataPreprocessor`` in mmdet's registry."""
    from mmengine.registry import DefaultScope
    before = set(DefaultScope._instance_dict)
    yield
    for name in set(DefaultScope._instance_dict) - before:
        DefaultScope._instance_dict.pop(name)
