"""What mmvisattn's tools need from other libraries, each in a scope
(``mmvisattn/environment.py``): ``mmvisattn.runtime()`` lets torch's safe
loader read mmengine checkpoints and mmengine resolve ``mmvisattn::``
configs, and puts both back as they were. Importing changes nothing
(``test_import_identity.py``); the bf16 scope of mmcv's ops is in
test_amp.py."""
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.config.utils import MODULE2PACKAGE
from mmengine.logging import HistoryBuffer
from mmengine.utils import package_utils

import mmvisattn
from mmvisattn import environment

CASCADE = 'swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'


def _mmengine_like_checkpoint(path):
    """What mmengine pickles beside the weights: numpy scalars and arrays
    in ``meta``, ``HistoryBuffer`` in the message hub."""
    buffer = HistoryBuffer()
    buffer.update(1.5)
    torch.save(dict(state_dict=dict(w=torch.ones(2)),
                    meta=dict(epoch=np.int64(3), seed=np.array([1, 2])),
                    message_hub=dict(log_scalars=dict(loss=buffer))), path)


def test_runtime_changes_two_things_and_puts_them_back():
    safe_before = torch.serialization.get_safe_globals()
    table_before = dict(MODULE2PACKAGE)
    assert 'mmvisattn' not in MODULE2PACKAGE  # import changed nothing
    with mmvisattn.runtime():
        assert MODULE2PACKAGE['mmvisattn'] == 'mmvisattn'
        assert HistoryBuffer in torch.serialization.get_safe_globals()
        with mmvisattn.runtime():  # re-entrant: the outer scope owns it
            pass
        assert 'mmvisattn' in MODULE2PACKAGE
    assert set(torch.serialization.get_safe_globals()) == set(safe_before)
    assert dict(MODULE2PACKAGE) == table_before


def test_what_the_user_allowed_before_stays_allowed():
    class Mine:
        pass

    before = torch.serialization.get_safe_globals()
    torch.serialization.add_safe_globals([Mine])
    try:
        with environment.safe_checkpoint_loading():
            pass
        assert Mine in torch.serialization.get_safe_globals()
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(before)


def test_full_mmengine_checkpoints_load_safely_inside_only(tmp_path):
    path = str(tmp_path / 'full.pth')
    _mmengine_like_checkpoint(path)
    with pytest.raises(Exception, match='weights_only|Unsupported global'):
        torch.load(path)
    with mmvisattn.runtime():
        loaded = torch.load(path)  # weights_only=True, torch's default
    assert int(loaded['meta']['epoch']) == 3
    assert loaded['message_hub']['log_scalars']['loss'].current() == 1.5


def test_our_own_reads_need_no_scope(tmp_path):
    """``init_cfg=Pretrained`` on our backbones reads a whole mmengine
    checkpoint under the allow-list for that read only."""
    from mmvisattn.checkpoint import read_checkpoint, read_weights
    path = str(tmp_path / 'full.pth')
    _mmengine_like_checkpoint(path)
    before = torch.serialization.get_safe_globals()
    assert int(read_weights(path)['meta']['epoch']) == 3
    assert int(read_checkpoint(path)['meta']['epoch']) == 3
    assert set(torch.serialization.get_safe_globals()) == set(before)


def test_the_package_folder_is_found_inside_runtime_only():
    """Inside the scope mmengine's config lookup finds the folder that
    ships ``.mim/configs`` (an editable install's, through the scoped
    lookup; a regular install's, through mmengine's own); outside it is
    mmengine's own function."""
    import mmengine.config.config as mmengine_config
    assert mmengine_config.get_installed_path is \
        package_utils.get_installed_path
    with mmvisattn.runtime():
        folder = mmengine_config.get_installed_path('mmvisattn')
        assert osp.realpath(folder) == osp.realpath(
            osp.dirname(mmvisattn.__file__))
        assert osp.isfile(osp.join(folder, '.mim', 'configs', CASCADE))
        # every other package: mmengine's own answer
        assert mmengine_config.get_installed_path('mmdet') == \
            package_utils.get_installed_path('mmdet')
    assert mmengine_config.get_installed_path is \
        package_utils.get_installed_path


@pytest.mark.parametrize('style', ['mmvisattn', 'mmdet'])
def test_pkg_configs_resolve_inside_runtime(style, tmp_path):
    base = dict(mmvisattn=f'mmvisattn::{CASCADE}',
                mmdet='mmdet::_base_/default_runtime.py')[style]
    cfg_file = tmp_path / 'c.py'
    cfg_file.write_text(f"_base_ = '{base}'\n")
    with mmvisattn.runtime():
        cfg = Config.fromfile(str(cfg_file))
    assert 'default_hooks' in cfg
    if style == 'mmvisattn':
        with pytest.raises(AssertionError, match='mmvisattn'):
            Config.fromfile(str(cfg_file))  # mmengine's own words, outside
