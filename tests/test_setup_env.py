"""The changes ``import mmvisattn`` makes to other libraries
(``mmvisattn/setup_env.py``): each listed in the module's header, each
scoped. Here: mmengine's ``pkg::`` config lookup, answered through
importlib only for the packages that need it. The bf16 scope of mmcv's ops
is in test_amp.py."""
import ast
import importlib
import importlib.metadata
import inspect
import os.path as osp
import sys
import warnings

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
    assert called == {'register_safe_globals', 'register_config_package',
                      'scope_mmcv_ops_fp32_to_bf16_amp'}
    for name in called | {'mmcv_ops_fp32_under_bf16',
                          'patch_instaboostfast', 'uses_importlib_lookup'}:
        assert f':func:`{name}`' in setup_env.__doc__, name


def test_config_lookup_delegates_to_mmengine_except_where_it_cannot():
    """mmengine's own functions answer for a regularly installed package
    (mmdet, mmseg by its distribution name), ours for mmvisattn; the
    wrappers keep mmengine's originals."""
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            assert mmengine_config.is_installed(package)
            assert lookup(package) == module_folder
        # mmengine's functions ran (they import pkg_resources), quietly
        assert 'pkg_resources' in sys.modules
        assert not [w for w in caught if 'pkg_resources' in str(w.message)]
    assert not mmengine_config.is_installed('no_such_package_mmvisattn')


def test_scoped_lookup_calls_ours_only_for_the_packages_that_need_it(
        monkeypatch):
    calls = []
    lookup = setup_env._scoped_lookup(
        lambda p: calls.append(('ours', p)) or 'ours',
        lambda p: calls.append(('mmengine', p)) or 'mmengine')
    assert lookup('mmvisattn') == 'ours' and lookup('mmdet') == 'mmengine'
    # where pkg_resources is gone (setuptools>=81) mmengine's cannot run
    monkeypatch.setitem(sys.modules, 'pkg_resources', None)
    assert setup_env.uses_importlib_lookup('mmdet')
    assert lookup('mmdet') == 'ours'
    assert calls == [('ours', 'mmvisattn'), ('mmengine', 'mmdet'),
                     ('ours', 'mmdet')]
    assert mmengine_config.get_installed_path('mmdet') == osp.dirname(
        importlib.import_module('mmdet').__file__)


def test_an_editable_install_is_found_where_its_code_is(tmp_path,
                                                         monkeypatch):
    """A PEP 660 editable install: the distribution's metadata sits in
    site-packages, the code in the checkout. mmengine's rule names
    ``site-packages/<module>``, which does not exist; ours the checkout."""
    site, checkout = tmp_path / 'site-packages', tmp_path / 'checkout'
    info = site / 'mmfake_editable-0.1.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(
        'Metadata-Version: 2.1\nName: mmfake-editable\nVersion: 0.1\n')
    (info / 'top_level.txt').write_text('mmfake_mod\n')
    (checkout / 'mmfake_mod').mkdir(parents=True)
    (checkout / 'mmfake_mod' / '__init__.py').write_text('')
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(checkout))
    assert importlib.metadata.distribution('mmfake-editable')
    assert not setup_env._mmengine_rule_finds('mmfake-editable')
    assert setup_env.uses_importlib_lookup('mmfake-editable')
    assert mmengine_config.is_installed('mmfake-editable')
    assert mmengine_config.get_installed_path('mmfake-editable') == str(
        checkout / 'mmfake_mod')
    # the regular layout (code next to its metadata) stays mmengine's
    (site / 'mmfake_mod').mkdir()
    assert not setup_env.uses_importlib_lookup('mmfake-editable')


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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        cfg = Config.fromfile(str(cfg_file))
    assert 'default_hooks' in cfg
    assert not [w for w in caught if 'pkg_resources' in str(w.message)]
