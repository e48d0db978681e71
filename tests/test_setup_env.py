"""The changes ``import mmvisattn`` makes to other libraries
(``mmvisattn/setup_env.py``): each listed in the module's header, each
scoped. Here: mmengine's ``pkg::`` config lookup, answered through
importlib for mmvisattn only. The bf16 scope of mmcv's ops
is in test_amp.py."""
import ast
import importlib
import importlib.metadata
import inspect
import os.path as osp

import mmengine.config.config as mmengine_config
import pytest
from mmengine.utils import package_utils

import mmvisattn  # noqa: F401

# (``mmvisattn.setup_env`` is the function the package re-exports)
setup_env = importlib.import_module('mmvisattn.setup_env')


def test_header_lists_every_change_setup_env_makes():
    """Every function :func:`setup_env` calls is named in the header, as
    is every other global change the module offers."""
    tree = ast.parse(inspect.getsource(setup_env.setup_env))
    called = {node.func.id for node in ast.walk(tree)
              if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Name)}
    assert called == {'register_safe_globals', 'register_config_package'}
    for name in called | {'mmcv_ops_fp32_under_bf16'}:
        assert f':func:`{name}`' in setup_env.__doc__, name


def test_config_lookup_is_ours_for_mmvisattn_and_mmengines_elsewhere():
    """mmengine's own functions, unchanged, answer for every package but
    mmvisattn (mmdet, mmseg by its distribution name); the wrappers keep
    mmengine's originals."""
    lookup = mmengine_config.get_installed_path
    assert lookup.mmengine_lookup is package_utils.get_installed_path
    assert mmengine_config.is_installed.mmengine_lookup is \
        package_utils.is_installed
    assert setup_env.uses_importlib_lookup('mmvisattn')
    mmvisattn_folder = osp.dirname(osp.abspath(mmvisattn.__file__))
    assert lookup('mmvisattn') == mmvisattn_folder
    for package, module in (('mmdet', 'mmdet'), ('mmsegmentation', 'mmseg')):
        assert not setup_env.uses_importlib_lookup(package)
        module_folder = osp.dirname(
            importlib.import_module(module).__file__)
        assert mmengine_config.is_installed(package)
        assert lookup(package) == module_folder
    assert not mmengine_config.is_installed('no_such_package_mmvisattn')


def test_scoped_lookup_calls_ours_only_for_mmvisattn():
    calls = []
    lookup = setup_env._scoped_lookup(
        lambda p: calls.append(('ours', p)) or 'ours',
        lambda p: calls.append(('mmengine', p)) or 'mmengine')
    assert lookup('mmvisattn') == 'ours' and lookup('mmdet') == 'mmengine'
    assert calls == [('ours', 'mmvisattn'), ('mmengine', 'mmdet')]


def test_register_config_package_is_idempotent():
    before = (mmengine_config.get_installed_path,
              mmengine_config.is_installed)
    setup_env.register_config_package()
    assert (mmengine_config.get_installed_path,
            mmengine_config.is_installed) == before


@pytest.mark.parametrize('style', ['mmvisattn', 'mmdet'])
def test_pkg_configs_resolve_through_either_lookup(style, tmp_path):
    from mmengine.config import Config
    base = dict(mmvisattn='mmvisattn::swin/cascade-mask-rcnn_swin-t-p4-w7_'
                'fpn_giou-4conv1f_ms-crop-3x_coco.py',
                mmdet='mmdet::_base_/default_runtime.py')[style]
    cfg_file = tmp_path / 'c.py'
    cfg_file.write_text(f"_base_ = '{base}'\n")
    cfg = Config.fromfile(str(cfg_file))
    assert 'default_hooks' in cfg
