"""RSWAtt's variants as registered parts: window predictors, reconstructions
and fusions chosen by ``type``, each with its own options checked when the
layer is built; the removed string options name their new form; one return
type for every variant; the plug-ins, neck, heads, block and backbones build
any registered RSWAtt attention from ``attn_cfg``; checkpoints of the flat
layout before the parts still load."""
import re

import pytest
import torch
from mmengine.registry import DefaultScope

from mmvisattn.models.backbones import RSWAttTransformer, RSWAttViT
from mmvisattn.models.decode_heads import RSWAttHead, RSWAttUPerHead
from mmvisattn.models.layers import (ConcatFusion, GateFusion,
                                     ReconstructedWindowAttention, RSWAttBlock,
                                     RSWAttOutput, ScaleFusion,
                                     WindowPredictor, WindowReconstruction)
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
    with pytest.raises(ValueError, match=re.escape(message)):
        ReconstructedWindowAttention(16, 2, **kwargs)


@pytest.mark.parametrize('old, new', [
    (dict(predictor='anchors'),
     "window_predictor=dict(type='AnchorExtents')"),
    (dict(predictor='offsets', init_extent=.6, predictor_gain=10.),
     "window_predictor=dict(type='OffsetExtents', init_extent=0.6)"),
    (dict(predictor_gain=1., init_extent=.5),
     "window_predictor=dict(type='DirectExtents', init_extent=0.5, "
     'gain=1.0)'),
    (dict(predictor='enhanced_anchors', anchors=((1., 1., 1., 1.), )),
     "window_predictor=dict(type='EnhancedAnchorExtents', anchors=((1.0, "
     '1.0, 1.0, 1.0),))'),
    (dict(adaptive=False), 'window_predictor=None'),
    (dict(reconstruct='mlp'),
     "reconstruction=dict(type='MLPReweighting'), window_predictor=None"),
    (dict(temperature=.3),
     "reconstruction=dict(type='SoftWindows', temperature=0.3)"),
    (dict(fusion='concat'), "fusion=dict(type='ConcatFusion')"),
])
def test_removed_string_options_name_their_new_form(old, new):
    given = ', '.join(f'{k}={v!r}' for k, v in old.items())
    with pytest.raises(ValueError,
                       match=re.escape(f'{given} is now {new}')):
        ReconstructedWindowAttention(16, 2, **old)


def test_removed_options_through_the_modules_that_build_the_layer():
    with pytest.raises(ValueError,
                       match=re.escape('adaptive=False is now '
                                       'window_predictor=None')):
        RSWAttTransformer(arch='nano', attn_cfg=dict(adaptive=False))
    with pytest.raises(ValueError, match=re.escape(
            "predictor='offsets' is now window_predictor=dict("
            "type='OffsetExtents')")):
        RSWAttNeck(16, 1, attn_cfg=dict(predictor='offsets'))
    with pytest.raises(ValueError, match='rswatt_cfg=.* is now flat'):
        RSWAttUPerHead(rswatt_cfg=dict(num_heads=2), in_channels=[8, 8],
                       in_index=[0, 1], pool_scales=(1, ), channels=8,
                       num_classes=2)
    with pytest.raises(TypeError, match='unexpected options window_size'):
        ReconstructedWindowAttention(16, 2, window_size=5)


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
        return RSWAttPlugin(16, window_sizes=(3, ), attn_cfg=cfg)

    def neck(cfg):
        return RSWAttNeck(16, 2, window_sizes=(3, ), attn_cfg=cfg)

    def head(cfg):
        return RSWAttHead(in_channels=[16, 16], in_index=[0, 1], channels=16,
                          num_classes=2, num_layers=1, num_heads=2,
                          window_sizes=(3, ), attn_cfg=cfg)

    def uper_head(cfg):
        return RSWAttUPerHead(in_channels=[16, 16], in_index=[0, 1],
                              pool_scales=(1, ), channels=16, num_classes=2,
                              window_sizes=(3, ), attn_cfg=cfg)

    def transformer(cfg):
        return RSWAttTransformer(
            arch=dict(embed_dims=16, depths=(1, 1), num_heads=(1, 2)),
            window_sizes=(3, ), attn_cfg=cfg, out_indices=(0, 1))

    def vit(cfg):
        return RSWAttViT(dict(embed_dims=16, depth=1, num_heads=2),
                         img_size=32, window_sizes=(3, ), attn_cfg=cfg)

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
            "attn_cfg type='WindowAttention' is not an RSWAtt attention")):
        build(dict(type='WindowAttention'))
    with pytest.raises(ValueError,
                       match=re.escape('attn_cfg.window_sizes is set by')):
        build(dict(window_sizes=(5, )))


def test_parts_are_found_under_another_default_scope():
    """An mmdet config builds the neck inside mmdet's scope; the parts are
    still looked up in mmvisattn's registry."""
    import mmdet.models  # noqa: F401  (registers mmdet's modules)
    from mmdet.registry import MODELS as MMDET_MODELS
    with DefaultScope.overwrite_default_scope('mmdet'):
        neck = MMDET_MODELS.build(dict(
            type='mmvisattn.RSWAttNeck', in_channels=16, num_levels=1,
            window_sizes=(3, ),
            attn_cfg=dict(window_predictor=dict(type='OffsetExtents'),
                          fusion=dict(type='ConcatFusion'))))
    attn = neck.blocks[0].attn
    assert type(attn.window_pred).__name__ == 'OffsetExtents'
    assert isinstance(attn.fusion, ConcatFusion)


# The keys each variant saved before the parts (every parameter on the
# layer), for window sizes (3, 5).
TABLES = ['relative_position_bias_tables.0', 'relative_position_bias_tables.1']
FLAT_KEYS = {
    'direct-gate': (
        dict(),
        ['qkv.weight', 'qkv.bias', 'window_pred.weight', 'window_pred.bias',
         'scale_gate.weight', 'scale_gate.bias', 'proj.weight', 'proj.bias']),
    'offsets-concat': (
        dict(window_predictor=dict(type='OffsetExtents'),
             fusion=dict(type='ConcatFusion')),
        ['scale_weights', 'qkv.weight', 'qkv.bias', 'window_pred.0.weight',
         'window_pred.0.bias', 'window_pred.2.weight', 'window_pred.2.bias',
         'proj.weight', 'proj.bias']),
    'enhanced-anchors-gate': (
        dict(window_predictor=dict(type='EnhancedAnchorExtents')),
        ['qkv.weight', 'qkv.bias', 'window_pred.weight', 'window_pred.bias',
         'scale_gate.weight', 'scale_gate.bias', 'proj.weight', 'proj.bias']),
    'fixed-concat': (
        dict(window_predictor=None, fusion=dict(type='ConcatFusion')),
        ['scale_weights', 'qkv.weight', 'qkv.bias', 'proj.weight',
         'proj.bias']),
    'mlp-gate': (
        dict(window_predictor=None,
             reconstruction=dict(type='MLPReweighting')),
        ['logit_scale', 'qkv.0.weight', 'qkv.0.bias', 'qkv.1.weight',
         'qkv.1.bias'] + [f'reweight.{s}.{i}.{p}' for s in (0, 1)
                          for i in (0, 2) for p in ('weight', 'bias')] +
        ['scale_gate.weight', 'scale_gate.bias', 'proj.weight',
         'proj.bias']),
}
# where the parts keep those parameters now
PART_KEYS = (('window_pred.linear.', 'window_pred.'),
             ('window_pred.mlp.', 'window_pred.'),
             ('fusion.gate.', 'scale_gate.'),
             ('fusion.scale_weights', 'scale_weights'),
             ('reconstruction.', ''))


def _flat_key(key):
    for new, old in PART_KEYS:
        if key.startswith(new):
            return old + key[len(new):]
    return key


@pytest.mark.parametrize('name', list(FLAT_KEYS))
def test_checkpoints_of_the_flat_layout_load(name):
    """The parameters are the same (names and shapes of the flat layout,
    counts) and a state dict saved with the flat keys loads strictly, to
    the same outputs."""
    kwargs, flat_keys = FLAT_KEYS[name]
    torch.manual_seed(0)
    layer = ReconstructedWindowAttention(16, 2, (3, 5), **kwargs).eval()
    layer.init_weights()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn_like(p) * .1)
    state = layer.state_dict()
    flat = {_flat_key(k): v for k, v in state.items()}
    assert sorted(flat) == sorted(flat_keys + TABLES)
    other = ReconstructedWindowAttention(16, 2, (3, 5), **kwargs).eval()
    other.load_state_dict(flat)  # strict
    x = torch.randn(1, 5, 6, 16)
    with torch.no_grad():
        for a, b in zip(layer(x), other(x)):
            if a is not None:
                torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_backbone_checkpoints_of_both_earlier_layouts_load():
    """The stage layout of RSWAttTransformer's own hook and the flat layer
    keys, in one checkpoint."""
    torch.manual_seed(0)
    arch = dict(embed_dims=16, depths=(1, 1), num_heads=(1, 2))
    model = RSWAttTransformer(arch=arch, window_sizes=(3, 5),
                              out_indices=(0, 1)).eval()
    model.init_weights()
    old = {}
    for key, value in model.state_dict().items():
        prefix, sep, rest = key.partition('.attn.')
        key = prefix + sep + _flat_key(rest) if sep else key
        key = re.sub(r'^layers\.(\d+)\.blocks\.', r'stages.\1.', key)
        key = re.sub(r'^layers\.(\d+)\.downsample\.', r'downsamples.\1.',
                     key)
        old[key] = value.clone()
    assert 'stages.0.0.attn.window_pred.weight' in old
    assert 'stages.1.0.attn.scale_gate.bias' in old
    other = RSWAttTransformer(arch=arch, window_sizes=(3, 5),
                              out_indices=(0, 1)).eval()
    other.load_state_dict(old)  # strict
    x = torch.randn(1, 3, 32, 24)
    with torch.no_grad():
        for a, b in zip(model(x), other(x)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
