"""RSWAtt's variants as registered parts: window predictors, reconstructions
and fusions chosen by ``type``, each with its own options checked when the
layer is built; unknown options refused by name; one return type for every
variant; the plug-ins, neck, heads, block and backbones build any registered
RSWAtt attention from ``attn_cfg``."""
import inspect
import re

import pytest
import torch
from mmengine.registry import DefaultScope

from mmvisattn.models.backbones import RSWAttTransformer, RSWAttViT
from mmvisattn.models.decode_heads import RSWAttHead, RSWAttUPerHead
from mmvisattn.models.layers import (
    ConcatFusion,
    GateFusion,
    ReconstructedWindowAttention,
    RSWAttBlock,
    RSWAttOutput,
    ScaleFusion,
    WindowPredictor,
    WindowReconstruction,
)
from mmvisattn.models.plugins import RSWAttNeck, RSWAttPlugin
from mmvisattn.registry import MODELS

PREDICTORS = ('DirectExtents', 'OffsetExtents', 'AnchorExtents',
              'EnhancedAnchorExtents')


def test_every_part_is_registered_under_its_kind():
    for names, base in ((PREDICTORS, WindowPredictor),
                        (('SoftWindows', 'MLPReweighting'),
                         WindowReconstruction),
                        (('GateFusion', 'ConcatFusion'), ScaleFusion)):
        for name in names:
            assert issubclass(MODELS.get(name), base), name


@pytest.mark.parametrize('kwargs, message', [
    # an option another part takes
    (dict(window_predictor=dict(type='OffsetExtents', gain=10.)),
     "window_predictor=dict(type='OffsetExtents'): OffsetExtents takes no "
     "option 'gain' (its options: init_extent, hidden_dims)"),
    (dict(window_predictor=dict(type='AnchorExtents', init_extent=.5)),
     "AnchorExtents takes no option 'init_extent' (its options: anchors, "
     'gain)'),
    (dict(fusion=dict(type='GateFusion', temperature=.5)),
     "GateFusion takes no option 'temperature' (its options: none)"),
    (dict(reconstruction=dict(type='SoftWindows', anchors=((1, 1, 1, 1), ))),
     "SoftWindows takes no option 'anchors' (its options: temperature)"),
    # what the layer sets itself
    (dict(window_predictor=dict(type='DirectExtents', embed_dims=8)),
     'embed_dims is set by the attention'),
    # an unknown type or no dict
    (dict(fusion=dict(type='SumFusion')),
     "fusion: type='SumFusion' is not a registered ScaleFusion (types: "
     'ConcatFusion, GateFusion)'),
    (dict(window_predictor=dict(type='GateFusion')),
     "type='GateFusion' is not a registered WindowPredictor"),
    (dict(window_predictor='DirectExtents'),
     "window_predictor must be dict(type=..., **options), got "
     "'DirectExtents'"),
    (dict(fusion='sum'), "fusion must be dict(type=..., **options)"),
    # the MLP reconstruction attends the whole window
    (dict(reconstruction=dict(type='MLPReweighting')),
     "reconstruction=dict(type='MLPReweighting') takes no window predictor "
     "(got window_predictor={'type': 'DirectExtents'}); set "
     'window_predictor=None'),
    # the soft border of windows that are not predicted
    (dict(window_predictor=None,
          reconstruction=dict(type='SoftWindows', temperature=.3)),
     'temperature applies to predicted windows only'),
    (dict(window_predictor=dict(type='AnchorExtents', anchors=(1., 1.))),
     'anchors must be'),
])
def test_an_option_the_part_does_not_take_is_an_error(kwargs, message):
    # an unknown option is a TypeError (as Python's unexpected keyword),
    # every other mistake a ValueError
    error = TypeError if 'takes no option' in message else ValueError
    with pytest.raises(error, match=re.escape(message)):
        ReconstructedWindowAttention(16, 2, **kwargs)


def test_an_unknown_option_is_a_type_error_naming_it():
    """Also for the string options of the unreleased API, removed
    (CHANGELOG.md): the parts are chosen by type."""
    for kwargs, key in ((dict(scale_windowss=(5, )), 'scale_windowss'),
                        (dict(predictor='anchors'), 'predictor'),
                        (dict(adaptive=False), 'adaptive')):
        with pytest.raises(TypeError, match=key):
            ReconstructedWindowAttention(16, 2, **kwargs)
    with pytest.raises(TypeError, match='rswatt_cfg'):
        RSWAttUPerHead(rswatt_cfg=dict(num_heads=2), in_channels=[8, 8],
                       in_index=[0, 1], pool_scales=(1, ), channels=8,
                       num_classes=2)


def _variants():
    for predictor in PREDICTORS + (None, ):
        for fusion in ('GateFusion', 'ConcatFusion'):
            yield dict(window_predictor=predictor and dict(type=predictor),
                       fusion=dict(type=fusion))
    for fusion in ('GateFusion', 'ConcatFusion'):
        yield dict(window_predictor=None, fusion=dict(type=fusion),
                   reconstruction=dict(type='MLPReweighting'))


@pytest.mark.parametrize('kwargs', list(_variants()))
def test_every_variant_returns_one_type(kwargs):
    torch.manual_seed(0)
    layer = ReconstructedWindowAttention(16, 2, (3, 5), **kwargs)
    layer.init_weights()
    x = torch.randn(2, 6, 7, 16)
    result = layer(x)
    assert type(result) is RSWAttOutput
    assert result.out.shape == x.shape and result.global_out is None
    if layer.window_pred is None:
        assert result.extents is None
    else:
        assert result.extents.shape == (2, 6, 7, 2, 4)
    if layer.reconstruction.takes_global_tokens:
        tokens = torch.randn(2, 1, 16)
        with_tokens = layer(x, global_tokens=tokens)
        assert type(with_tokens) is RSWAttOutput
        assert with_tokens.global_out.shape == tokens.shape
        torch.testing.assert_close(with_tokens.out, result.out)


class _Probe(ReconstructedWindowAttention):
    """A subclass, as a registered or passed RSWAtt-compatible attention."""


def _attentions(module):
    return [m for m in module.modules()
            if isinstance(m, ReconstructedWindowAttention)]


def _builders():
    """(the module, build(attn_cfg), a forward of the built module)."""
    def block(cfg):
        return RSWAttBlock(16, 2, (3, ), attn_cfg=cfg)

    def plugin(cfg):
        return RSWAttPlugin(16, scale_windows=(3, ), attn_cfg=cfg)

    def neck(cfg):
        return RSWAttNeck(16, 2, scale_windows=(3, ), attn_cfg=cfg)

    def head(cfg):
        return RSWAttHead(in_channels=[16, 16], in_index=[0, 1], channels=16,
                          num_classes=2, num_layers=1, num_heads=2,
                          scale_windows=(3, ), attn_cfg=cfg)

    def uper_head(cfg):
        return RSWAttUPerHead(in_channels=[16, 16], in_index=[0, 1],
                              pool_scales=(1, ), channels=16, num_classes=2,
                              scale_windows=(3, ), attn_cfg=cfg)

    def transformer(cfg):
        return RSWAttTransformer(
            arch=dict(embed_dims=16, depths=(1, 1), num_heads=(1, 2)),
            scale_windows=(3, ), attn_cfg=cfg, out_indices=(0, 1))

    def vit(cfg):
        return RSWAttViT(dict(embed_dims=16, depth=1, num_heads=2),
                         img_size=32, scale_windows=(3, ), attn_cfg=cfg)

    maps = [torch.randn(1, 16, 8, 6), torch.randn(1, 16, 4, 3)]
    return [
        ('RSWAttBlock', block,
         lambda m: m(torch.randn(1, 1 + 8 * 6, 16), (8, 6))),
        ('RSWAttPlugin', plugin, lambda m: m(maps[0])),
        ('RSWAttNeck', neck, lambda m: m(maps)),
        ('RSWAttHead', head, lambda m: m(maps)),
        ('RSWAttUPerHead', uper_head, lambda m: m(maps)),
        ('RSWAttTransformer', transformer,
         lambda m: m(torch.randn(1, 3, 32, 24))),
        ('RSWAttViT', vit, lambda m: m(torch.randn(1, 3, 32, 32))),
    ]


@pytest.mark.parametrize('build, run', [b[1:] for b in _builders()],
                         ids=[b[0] for b in _builders()])
def test_attn_cfg_builds_any_registered_rswatt_attention(build, run):
    # by registered name (scoped too), by class, and the parts' options
    for attn_type in ('ReconstructedWindowAttention',
                      'mmvisattn.ReconstructedWindowAttention', _Probe):
        module = build(dict(type=attn_type,
                            fusion=dict(type='ConcatFusion')))
        attns = _attentions(module)
        expected = _Probe if attn_type is _Probe else \
            ReconstructedWindowAttention
        assert attns and all(type(a) is expected for a in attns)
        assert all(isinstance(a.fusion, ConcatFusion) for a in attns)
    module.init_weights()
    module.eval()
    with torch.no_grad():
        run(module)
    # the default: the layer's own defaults
    assert all(isinstance(a.fusion, GateFusion)
               for a in _attentions(build(None)))
    with pytest.raises(ValueError, match=re.escape(
            "attn_cfg: type='WindowAttention' is not a registered "
            'ReconstructedWindowAttention')):
        build(dict(type='WindowAttention'))
    with pytest.raises(ValueError,
                       match=re.escape('attn_cfg: scale_windows is set by')):
        build(dict(scale_windows=(5, )))


def test_parts_are_found_under_another_default_scope():
    """An mmdet config builds the neck inside mmdet's scope; the parts are
    still looked up in mmvisattn's registry."""
    import mmdet.models  # noqa: F401  (registers mmdet's modules)
    from mmdet.registry import MODELS as MMDET_MODELS
    with DefaultScope.overwrite_default_scope('mmdet'):
        neck = MMDET_MODELS.build(dict(
            type='mmvisattn.RSWAttNeck', in_channels=16, num_levels=1,
            scale_windows=(3, ),
            attn_cfg=dict(window_predictor=dict(type='OffsetExtents'),
                          fusion=dict(type='ConcatFusion'))))
    attn = neck.blocks[0].attn
    assert type(attn.window_pred).__name__ == 'OffsetExtents'
    assert isinstance(attn.fusion, ConcatFusion)


HEAD = dict(in_channels=[16, 32], in_index=[0, 1], channels=16,
            num_classes=3, num_heads=2)


def test_scale_windows_is_the_name_of_rswatts_windows():
    """``window_size`` is one window everywhere (an int or an (h, w)
    pair); RSWAtt's windows, one per scale, are ``scale_windows``."""
    assert 'scale_windows' in inspect.signature(RSWAttHead.__init__).parameters
    assert 'window_size' not in inspect.signature(
        RSWAttTransformer.__init__).parameters
    head = RSWAttHead(scale_windows=(3, 5), **HEAD)
    assert head.layers[0].attn.scale_windows == (3, 5)
