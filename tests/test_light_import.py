"""A light ``import mmvisattn``: the package and every backbone work without
mmcv's compiled ops (``mmcv._ext``: mmcv-lite) and without mmpretrain; what
needs them imports them where it is used and says what is missing
(``mmvisattn/utils/optional.py``, ``mmvisattn/registry.py``)."""
import importlib
import json
import subprocess
import sys
import textwrap

import pytest
import torch

from helpers import REPO
from helpers.seg_config import tool_env

# Run first in the subprocess: a finder ahead of every other one that makes
# mmcv._ext and mmpretrain (and their submodules) unimportable, as on a
# machine with mmcv-lite and no mmpretrain.
HIDE = textwrap.dedent('''
    import importlib.abc, sys
    HIDDEN = ('mmcv._ext', 'mmpretrain')
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == h or name.startswith(h + '.') for h in HIDDEN):
                raise ModuleNotFoundError(f'No module named {name!r}',
                                          name=name)
    sys.meta_path.insert(0, Hide())
''')

BUILD = textwrap.dedent('''
    import json
    import torch
    import mmvisattn
    from mmvisattn import MODELS
    report = dict(after_import=sorted(
        m for m in ('mmcv.ops', 'mmcv._ext', 'mmpretrain', 'mmdet', 'mmseg')
        if m in sys.modules))
    torch.manual_seed(0)
    x = torch.rand(1, 3, 64, 64)
    configs = dict(
        swin=dict(type='SwinTransformer', arch='tiny'),
        swinv2=dict(type='SwinTransformerV2', arch='tiny'),
        tnt=dict(type='TNT', arch='small', img_size=64, out_type='pyramid'),
        rswatt=dict(type='RSWAttTransformer', pixel_pos_embed=True,
                    pretrain_img_size=32),
        rswatt_vit=dict(type='RSWAttViT', arch='tiny', img_size=32,
                        pixel_pos_embed=True))
    report['shapes'] = {}
    for name, cfg in configs.items():
        model = MODELS.build(cfg)
        model.init_weights()
        model.eval()
        with torch.no_grad():
            out = model(x)
        assert all(torch.isfinite(o).all() for o in out), name
        report['shapes'][name] = [list(o.shape) for o in out]
    report['after_build'] = sorted(
        m for m in ('mmcv.ops', 'mmcv._ext', 'mmpretrain', 'mmdet', 'mmseg')
        if m in sys.modules)
    from mmvisattn.models.layers import CornerPoolBlock
    try:
        CornerPoolBlock(32, 'top_left')
    except ImportError as e:
        report['corner_pool'] = str(e)
    try:
        MODELS.build(dict(type='RepPointsV2Head', num_classes=2,
                          in_channels=32))
    except ImportError as e:
        report['registry'] = str(e)
    print('REPORT ' + json.dumps(report))
''')


@pytest.mark.slow
def test_import_and_backbones_without_compiled_mmcv_ops_and_mmpretrain():
    """With ``mmcv._ext`` and ``mmpretrain`` unimportable, ``import
    mmvisattn`` works, Swin-T, TNT (pyramid), RSWAttTransformer and
    RSWAttViT (both with the sinusoid position encoding) build from the
    registry and run a forward, neither mmdet nor mmseg is imported for
    them, and what truly needs mmcv's ops says so."""
    proc = subprocess.run(
        [sys.executable, '-c', HIDE + BUILD], cwd=REPO, env=tool_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:]
    line = [li for li in proc.stdout.splitlines() if li.startswith('REPORT ')]
    report = json.loads(line[-1][len('REPORT '):])
    assert report['after_import'] == [] and report['after_build'] == []
    assert report['shapes'] == dict(
        swin=[[1, 96, 16, 16], [1, 192, 8, 8], [1, 384, 4, 4],
              [1, 768, 2, 2]],
        swinv2=[[1, 96, 16, 16], [1, 192, 8, 8], [1, 384, 4, 4],
                [1, 768, 2, 2]],
        tnt=[[1, 96, 16, 16], [1, 192, 8, 8], [1, 384, 4, 4],
             [1, 384, 2, 2]],
        rswatt=[[1, 96, 16, 16], [1, 192, 8, 8], [1, 384, 4, 4],
                [1, 768, 2, 2]],
        rswatt_vit=[[1, 192]])
    assert report['corner_pool'].startswith(
        "CornerPoolBlock needs mmcv's compiled ops (mmcv._ext")
    assert 'install the full mmcv' in report['corner_pool']
    assert "'RepPointsV2Head' is not in mmvisattn's model registry" in \
        report['registry']
    assert 'mmvisattn.models.dense_heads' in report['registry']
    assert "needs mmcv's compiled ops" in report['registry'] or \
        "need mmcv's compiled ops" in report['registry']


def test_position_tables_are_mmpretrains_bit_for_bit():
    """The sinusoid table and its bicubic resize, written here so the
    backbones do without mmpretrain, equal mmpretrain's exactly (values,
    dtype, gradient)."""
    utils = pytest.importorskip('mmpretrain.models.utils')
    from mmvisattn.models.layers.position import resize_table, sincos_2d_table
    for size, dims in [((7, 7), 96), ((14, 14), 384), ((8, 12), 64),
                       ((5, 3), 4)]:
        assert torch.equal(
            sincos_2d_table(size, dims),
            utils.build_2d_sincos_position_embedding(size, dims))
        for dst in [(9, 13), (3, 2), size]:
            for dtype in (torch.float32, torch.bfloat16):
                table = torch.randn(1, size[0] * size[1], dims, dtype=dtype,
                                    requires_grad=True)
                want = utils.resize_pos_embed(table, size, dst,
                                              num_extra_tokens=0)
                got = resize_table(table, size, dst)
                assert got.dtype == want.dtype and torch.equal(got, want)
                weight = torch.randn(got.shape)
                g_want, = torch.autograd.grad((want * weight).sum(), table)
                g_got, = torch.autograd.grad((got * weight).sum(), table)
                assert torch.equal(g_got, g_want)


def test_missing_dependency_names_only_the_optional_ones():
    from mmvisattn.utils.optional import missing_dependency

    def missing(name):
        return missing_dependency(ModuleNotFoundError(name=name))
    assert missing('mmcv._ext') == 'mmcv._ext'
    assert missing('mmdet.models') == 'mmdet'
    assert missing('mmpretrain') == 'mmpretrain'
    assert missing('mmsegx') is None and missing('mmcv') is None
    assert missing_dependency(ImportError(name='mmdet')) is None


def _write_package(root, name, modules):
    package = root / name
    package.mkdir()
    (package / '__init__.py').write_text('')
    for module, text in modules.items():
        (package / f'{module}.py').write_text(textwrap.dedent(text))


def test_registry_imports_optional_parts_only_when_asked_and_names_what_is_missing(
        tmp_path, monkeypatch):
    """A name the required location registers is found without importing
    the optional ones; a missing name imports them, skips those whose
    optional dependency is absent and says which and why; any other import
    error propagates."""
    from mmvisattn.registry import _Registry
    _write_package(tmp_path, 'lightreg', dict(
        core='''
            from lightreg.registry import REG
            @REG.register_module()
            class Core:
                pass
        ''',
        heads='''
            import sys
            sys.modules['lightreg'].heads_imported = True
            raise ModuleNotFoundError("No module named 'mmdet.models'",
                                      name='mmdet.models')
        ''',
        plugins='''
            from lightreg.registry import REG
            @REG.register_module()
            class Plugin:
                pass
        ''',
        broken='''
            import lightreg_no_such_module
        ''',
        registry='''
            from mmvisattn.registry import _Registry
            REG = _Registry('thing', scope='lightreg',
                            locations=['lightreg.core'],
                            optional_locations=['lightreg.heads',
                                                'lightreg.plugins'])
            BROKEN = _Registry('other', scope='lightreg_broken',
                               locations=['lightreg.core'],
                               optional_locations=['lightreg.broken'])
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    package = 'lightreg'  # written just above (no requirement to declare)
    lightreg = importlib.import_module(package)
    registries = importlib.import_module(f'{package}.registry')
    BROKEN, REG = registries.BROKEN, registries.REG
    try:
        assert isinstance(REG, _Registry)
        assert REG.get('Core').__name__ == 'Core'
        assert not hasattr(lightreg, 'heads_imported')
        assert REG.get('Plugin').__name__ == 'Plugin'  # imports the others
        assert lightreg.heads_imported
        with pytest.raises(ImportError, match=r"'Missing' is not in "
                           r"mmvisattn's thing registry.*lightreg.heads "
                           r'needs mmdet'):
            REG.get('Missing')
        with pytest.raises(ModuleNotFoundError,
                           match='lightreg_no_such_module'):
            BROKEN.get('Missing')
    finally:
        for name in [m for m in sys.modules if m.startswith('lightreg')]:
            del sys.modules[name]


def test_models_registry_finds_backbones_and_heads():
    """The full stack here: backbones from the required location, the
    detection parts from the optional ones."""
    from mmvisattn.registry import MODELS
    assert MODELS.get('SwinTransformer').__name__ == 'SwinTransformer'
    assert MODELS.get('RepPointsV2Head').__name__ == 'RepPointsV2Head'
    assert MODELS.get('mmvisattn.BiFPN').__name__ == 'BiFPN'
