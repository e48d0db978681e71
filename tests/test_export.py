"""Every backbone under both ONNX exporters and torch.jit.trace
(docs/deployment.md, "Backbones under both exporters").

Each model is exported at one input size with dynamic H and W and run
with onnxruntime at that size and at another (multiples of 32): outputs
equal eager within 1e-4 (fp32). What cannot be recorded with traced sizes
is refused at export with an error naming the option; a model exported
with static shapes is refused by onnxruntime at another size.

The fast tier keeps one cheap test per exporter (TorchScript, dynamo,
jit.trace) and the refusals; the matrix over every attention kind,
predictor and fusion is ``slow`` (about 20 s per dynamo export here).
"""
import copy
import io
import warnings

import numpy as np
import pytest
import torch

import mmvisattn  # noqa: F401
from mmvisattn.ops import (
    fast_path_allowed,
    halo_tiles,
    inside_image,
    outside_image_mask,
    shifted_window_mask,
    sliding_relative_index,
    window_layout,
)
from mmvisattn.registry import MODELS

ort = pytest.importorskip(
    'onnxruntime', reason='onnxruntime is needed to run exported models '
    '(requirements/deploy.txt)')
pytest.importorskip('onnx', reason='onnx is needed by torch.onnx.export '
                    '(requirements/deploy.txt)')

CACHES = (window_layout, shifted_window_mask, halo_tiles, inside_image,
          outside_image_mask, sliding_relative_index)
ATOL = 1e-4
EXPORT_SIZE, RUN_SIZE = 64, 96

SWIN = dict(type='SwinTransformer',
            arch=dict(embed_dims=32, depths=(2, 2), num_heads=(2, 4)),
            out_indices=(0, 1))
RSWATT = dict(type='RSWAttTransformer',
              arch=dict(embed_dims=32, depths=(1, 1), num_heads=(2, 4)),
              out_indices=(0, 1))
RSWATT_VIT = dict(type='RSWAttViT',
                  arch=dict(embed_dims=32, depth=2, num_heads=2),
                  img_size=64, scale_windows=(2, 4))
SWIN_V2 = dict(type='SwinTransformerV2',
               arch=dict(embed_dims=32, depths=(2, 2), num_heads=(2, 4)),
               out_indices=(0, 1), window_size=4, pretrained_window_sizes=8)
TNT = dict(type='TNT',
           arch=dict(outer_dims=48, inner_dims=12, outer_heads=2,
                     inner_heads=2, depth=4), img_size=64)

# Every backbone and attention variant with a code path of its own.
CONFIGS = {
    'swin-window-cyclic': SWIN,
    'swin-window-padding': dict(SWIN, attn_cfg=dict(
        type='WindowAttention', shift_mode='padding')),
    'swin-window-none': dict(SWIN, attn_cfg=dict(
        type='WindowAttention', shift_mode='none')),
    # 4x8 windows: 12x12 at the run size pads its columns
    'swin-window-rectangular': dict(SWIN, window_size=(4, 8)),
    'swin-window-rectangular-padding': dict(
        SWIN, window_size=(4, 8), attn_cfg=dict(type='WindowAttention',
                                                shift_mode='padding')),
    'swin-window-no-content': dict(SWIN, attn_cfg=dict(
        type='WindowAttention', use_content=False)),
    # 64 px: the 8x8 stage-2 map is one window (not shifted); 96 px: 12x12
    # is shifted: the decision is taken in the graph
    'swin-window-pad_small_map=False': dict(SWIN, window_size=8,
                                            pad_small_map=False),
    'swin-sliding': dict(SWIN, attn_cfg=dict(type='SlidingWindowAttention')),
    'swin-halo-sliding': dict(SWIN, attn_cfg=dict(
        type='HaloSlidingWindowAttention')),
    'swin-performer': dict(SWIN, attn_cfg=dict(type='PerformerAttention')),
    'swin-global': dict(SWIN, attn_cfg=dict(type='GlobalAttention')),
    'swin-extra_global_block': dict(SWIN, extra_global_block=True),
    'swin-abs-pos-embed': dict(SWIN, use_abs_pos_embed=True,
                               pretrain_img_size=64),
    'swinv2': SWIN_V2,
    'swinv2-pad_small_map=False': dict(SWIN_V2, window_size=8,
                                       pad_small_map=False),
    'swinv2-abs-pos-embed': dict(SWIN_V2, use_abs_pos_embed=True,
                                 img_size=64),
    'tnt-cls_token': dict(TNT, out_type='cls_token'),
    'tnt-pyramid': dict(TNT, out_type='pyramid'),
    'tnt-pyramid-legacy': dict(TNT, out_type='pyramid', legacy=True),
    'rswatt-direct-gate': RSWATT,
    'rswatt-offsets': dict(RSWATT, attn_cfg=dict(
        window_predictor=dict(type='OffsetExtents'))),
    'rswatt-anchors': dict(RSWATT, attn_cfg=dict(
        window_predictor=dict(type='AnchorExtents'))),
    'rswatt-enhanced_anchors': dict(RSWATT, attn_cfg=dict(
        window_predictor=dict(type='EnhancedAnchorExtents'))),
    'rswatt-concat': dict(RSWATT, attn_cfg=dict(
        fusion=dict(type='ConcatFusion'))),
    'rswatt-fixed-windows': dict(RSWATT, attn_cfg=dict(
        window_predictor=None)),
    'rswatt-mlp-reweighting': dict(RSWATT, attn_cfg=dict(
        window_predictor=None, reconstruction=dict(type='MLPReweighting'))),
    'rswatt-pixel_pos_embed': dict(RSWATT, pixel_pos_embed=True,
                                   pretrain_img_size=64),
    'rswattvit-cls_token': RSWATT_VIT,
    'rswattvit-featmap': dict(RSWATT_VIT, out_type='featmap'),
}
EXPORTERS = ('torchscript', 'dynamo', 'jit.trace')
# the fast tier's one cheap test per exporter: dynamo and jit.trace here,
# TorchScript in test_torchscript_export_takes_the_plain_path_under_no_grad;
# and jit.trace of the windowless global attention (TNT's)
FAST = {('swin-window-cyclic', 'dynamo'), ('swin-window-cyclic', 'jit.trace'),
        ('swinv2', 'jit.trace'), ('tnt-pyramid', 'jit.trace')}
MATRIX = [
    pytest.param(name, exporter, id=f'{name}-{exporter}',
                 marks=() if (name, exporter) in FAST else pytest.mark.slow)
    for name in CONFIGS for exporter in EXPORTERS
]


def _build(cfg):
    torch.manual_seed(0)
    model = MODELS.build(copy.deepcopy(cfg))
    model.init_weights()
    return model.eval()


def _images(size):
    return torch.randn(1, 3, size, size,
                       generator=torch.Generator().manual_seed(size))


def _eager(model, x):
    with torch.no_grad():
        return [o.numpy() for o in model(x)]


def export(model, x, exporter, dynamic=True):
    """``model`` recorded on ``x`` by ``exporter``; returns ``run(x) ->
    list of arrays`` (onnxruntime for the ONNX exporters)."""
    if exporter == 'jit.trace':
        with torch.no_grad():
            traced = torch.jit.trace(model, (x, ), check_trace=False)

        def run_traced(images):
            with torch.no_grad():
                return [o.numpy() for o in traced(images)]

        return run_traced
    f = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        if exporter == 'torchscript':
            torch.onnx.export(
                model, (x, ), f, opset_version=17, dynamo=False,
                input_names=['images'],
                dynamic_axes={'images': {2: 'height', 3: 'width'}}
                if dynamic else None)
        else:
            pytest.importorskip('onnxscript', reason='the dynamo exporter '
                                'needs onnxscript')
            from torch.export import Dim
            shapes = ({2: 32 * Dim('h', min=1, max=64),
                       3: 32 * Dim('w', min=1, max=64)}, ) if dynamic \
                else None
            program = torch.onnx.export(model, (x, ), dynamo=True,
                                        dynamic_shapes=shapes,
                                        verbose=False)
            program.save(f)
    session = ort.InferenceSession(f.getvalue(),
                                   providers=['CPUExecutionProvider'])
    name = session.get_inputs()[0].name

    def run_onnx(images):
        return session.run(None, {name: images.numpy()})

    return run_onnx


def max_difference(expected, actual):
    assert [a.shape for a in actual] == [e.shape for e in expected]
    return max(float(np.abs(a - e).max()) for a, e in zip(actual, expected))


def check_export(cfg, exporter):
    model = _build(cfg)
    run = export(model, _images(EXPORT_SIZE), exporter)
    diffs = []
    for size in (EXPORT_SIZE, RUN_SIZE):
        x = _images(size)
        diffs.append(max_difference(_eager(model, x), run(x)))
    # the figures of docs/deployment.md (pytest -rA shows them)
    print(f'max |onnx - eager| at {EXPORT_SIZE}: {diffs[0]:.2e}, at '
          f'{RUN_SIZE}: {diffs[1]:.2e}')
    assert max(diffs) < ATOL, (exporter, diffs)


@pytest.mark.parametrize('name,exporter', MATRIX)
def test_export_equals_eager_at_two_sizes(name, exporter):
    check_export(CONFIGS[name], exporter)


def test_torchscript_export_takes_the_plain_path_under_no_grad():
    """The CPU fast path (residual scatter-added into a view, MLP chunks
    written in place with ``out=``) is mistranslated by the TorchScript
    exporter (outputs off by up to 4.7 for Swin-T): exported in eval mode
    under no_grad, where eager takes it, with chunks small enough that
    both rewrites run in eager, the graph still equals eager."""
    cfg = dict(SWIN, attn_cfg=dict(type='WindowAttention', chunk_tokens=64))
    model = _build(cfg)
    x = _images(EXPORT_SIZE)
    with torch.no_grad():
        assert fast_path_allowed(model.layers[0].blocks[0], x)
        eager = _eager(model, x)
        run = export(model, x, 'torchscript')
        assert max_difference(eager, run(x)) < ATOL
        y = _images(RUN_SIZE)
        assert max_difference(_eager(model, y), run(y)) < ATOL


def test_a_dynamo_export_leaves_no_fake_tensors_in_the_caches():
    """torch.export runs the model on FakeTensors; shape-derived tensors
    (window layouts, masks) built then were cached by size, and eager
    forwards at that size afterwards read them: silently wrong (off by
    1.19 on the small Swin). Nothing is cached while a graph is recorded
    now. One window attention layer, exported with static shapes (the
    sizes are ints then, as cache keys)."""
    pytest.importorskip('onnxscript', reason='the dynamo exporter needs '
                        'onnxscript')
    from mmvisattn.models.layers.window_msa import WindowAttention
    torch.manual_seed(0)
    attn = WindowAttention(16, 2, 4, shift_size=2).eval()

    class Shifted(torch.nn.Module):

        def __init__(self):
            super().__init__()
            self.attn = attn

        def forward(self, x):
            return self.attn(x)

    x = torch.randn(1, 10, 11, 16)
    with torch.no_grad():
        eager = attn(x)
    for cache in CACHES:
        cache.cache_clear()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(Shifted(), (x, ), dynamo=True, verbose=False)
    assert all(cache.cache_info().currsize == 0 for cache in CACHES)
    with torch.no_grad():
        assert torch.equal(attn(x), eager)


def test_what_cannot_be_recorded_is_refused_with_the_option():
    """Window attention with shift_mode='padding' and pad_small_map=False
    decides from the map size how much to pad: with traced sizes it is
    refused at export, naming both options."""
    cfg = dict(SWIN, window_size=8, pad_small_map=False,
               attn_cfg=dict(type='WindowAttention', shift_mode='padding'))
    model = _build(cfg)
    for exporter in ('torchscript', 'jit.trace'):
        with pytest.raises(NotImplementedError) as err:
            export(model, _images(EXPORT_SIZE), exporter)
        for words in ("shift_mode='padding'", 'pad_small_map=False'):
            assert words in str(err.value)


@pytest.mark.slow
def test_the_refused_option_exports_with_static_shapes_under_dynamo():
    cfg = dict(SWIN, window_size=8, pad_small_map=False,
               attn_cfg=dict(type='WindowAttention', shift_mode='padding'))
    model = _build(cfg)
    x = _images(EXPORT_SIZE)
    run = export(model, x, 'dynamo', dynamic=False)
    assert max_difference(_eager(model, x), run(x)) < ATOL


@pytest.mark.slow
@pytest.mark.parametrize('exporter', ['torchscript', 'dynamo'])
def test_a_static_export_refuses_another_size(exporter):
    """Exported without dynamic axes, the model says so at another size
    (onnxruntime checks the declared input shape)."""
    model = _build(SWIN)
    run = export(model, _images(EXPORT_SIZE), exporter, dynamic=False)
    with pytest.raises(Exception, match='invalid dimensions'):
        run(_images(RUN_SIZE))


def test_every_swin_attention_kind_is_in_the_matrix():
    """A new registered Swin attention kind gets its export tests here."""
    from mmvisattn.models.layers.attention import SelfAttention
    exported = {cfg.get('attn_cfg', {}).get('type', MODELS.get(
        cfg['type']).block.default_attention) for cfg in CONFIGS.values()
        if cfg['type'].startswith('SwinTransformer')}
    assert set(SelfAttention.kinds()) <= exported
