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
