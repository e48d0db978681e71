"""RSWAtt's source-described variants: fixed windows
(``window_predictor=None``), the concatenation fusion, the offset predictor and
the enhanced anchor reconstructor, global (class) tokens, the pixel position
encoding, ``RSWAttViT`` and its CIFAR-10 config, the RetinaNet + ``RSWAttNeck``
config, the ``RSWAttHead`` decoder configs, and the tools that show whether the
windows adapt (extents against objects) and whether it matters (the
ablation)."""
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from helpers import HELPERS, REPO, load_tool, runner_loss_step
from helpers.camvid import loss_step_on_camvid
from helpers.coco128 import loss_step_on_coco128
from mmvisattn.models.backbones import RSWAttViT
from mmvisattn.models.layers import (
    ConcatFusion,
    DirectExtents,
    OffsetExtents,
    PixelPositionEncoding,
    ReconstructedWindowAttention,
    RSWAttBlock,
)
from mmvisattn.ops import sliding_window_attention_naive

CONFIGS = osp.join(REPO, 'configs', 'rswatt')
PREDICTORS = ('DirectExtents', 'OffsetExtents', 'AnchorExtents',
              'EnhancedAnchorExtents')


def _layer(fusion='GateFusion', window_predictor='DirectExtents',
           **kwargs):
    torch.manual_seed(0)
    layer = ReconstructedWindowAttention(
        32, 4, fusion=dict(type=fusion),
        window_predictor=window_predictor and dict(type=window_predictor),
        **kwargs)
    layer.init_weights()
    with torch.no_grad():  # a non-trivial fusion and bias
        for table in layer.relative_position_bias_tables:
            table.normal_()
        if isinstance(layer.fusion, ConcatFusion):
            layer.fusion.scale_weights.normal_()
    return layer


def _reference(layer, x):
    """Plain sliding-window attention per scale (naive unfold), fused and
    projected with the layer's own weights."""
    B, H, W, C = x.shape
    heads = layer.num_heads
    q, k, v = layer.qkv(x).reshape(B, H, W, 3, heads, C // heads).permute(
        3, 0, 4, 1, 2, 5).unbind(0)
    outs = []
    for s, m in enumerate(layer.scale_windows):
        bias = layer.relative_position_bias_tables[s][getattr(
            layer, f'relative_index_{m}')].t()
        out = sliding_window_attention_naive(q, k, v, m, bias=bias)
        outs.append(out.permute(0, 2, 3, 1, 4).reshape(B, H, W, C))
    if isinstance(layer.fusion, ConcatFusion):
        w = layer.fusion.scale_weights.sigmoid()
        fused = torch.cat([w[i] * o for i, o in enumerate(outs)], -1)
    elif len(outs) == 1:
        fused = outs[0]
    else:
        g = layer.fusion.gate(x).softmax(-1)
        fused = sum(g[..., i, None] * o for i, o in enumerate(outs))
    return layer.proj(fused)


@pytest.mark.parametrize('fusion,sizes', [('GateFusion', (5, 9)),
                                          ('ConcatFusion', (4, 8, 16)),
                                          ('ConcatFusion', (3, ))])
def test_fixed_windows_are_plain_sliding_window_attention(fusion, sizes):
    layer = _layer(scale_windows=sizes, fusion=fusion, window_predictor=None)
    assert layer.window_pred is None
    x = torch.randn(2, 10, 13, 32)
    out, extents, _ = layer(x)
    assert extents is None
    assert torch.allclose(out, _reference(layer, x), atol=1e-5)


def _pin_full_windows(layer):
    """Predictor outputs that put every window at its full M x M."""
    pred = layer.window_pred
    last = pred.mlp[-1] if isinstance(pred, OffsetExtents) else pred.linear
    scales = len(layer.scale_windows)
    with torch.no_grad():
        last.weight.zero_()
        bias = last.bias.view(scales, -1)
        bias.zero_()
        if type(pred).__name__ in ('DirectExtents', 'OffsetExtents'):
            bias.fill_(50.)  # sigmoid -> 1; offsets clamp at the limits
        else:
            bias[:, 0] = 50.  # all weight on anchor 0, the full window


@pytest.mark.parametrize('predictor', PREDICTORS)
@pytest.mark.parametrize('fusion', ['GateFusion', 'ConcatFusion'])
def test_pinned_windows_equal_sliding_window_attention(predictor, fusion):
    layer = _layer(scale_windows=(4, 7), fusion=fusion,
                   window_predictor=predictor,
                   reconstruction=dict(type='SoftWindows', temperature=1e-4))
    _pin_full_windows(layer)
    x = torch.randn(2, 9, 11, 32)
    assert torch.allclose(layer(x).out, _reference(layer, x), atol=1e-5)


@pytest.mark.parametrize('predictor', PREDICTORS)
def test_gradients_reach_every_predictor(predictor):
    layer = _layer(scale_windows=(4, 8, 16), fusion='ConcatFusion',
                   window_predictor=predictor)
    out, extents, _ = layer(torch.randn(2, 12, 14, 32))
    limits = layer.window_pred.extent_limits
    assert extents.shape == (2, 12, 14, 3, 4)
    assert (extents >= 0).all() and (extents <= limits).all()
    (out**2).sum().backward()
    # the zero-initialised last layer gets a gradient at once; the offset
    # MLP's hidden layer from the second step on (as any MLP behind a zero
    # layer)
    torch.optim.SGD(layer.parameters(), lr=1e-3).step()
    layer.zero_grad()
    (layer(torch.randn(2, 12, 14, 32)).out**2).sum().backward()
    for name, p in layer.named_parameters():
        if name.startswith(('window_pred', 'fusion.scale_weights')):
            assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_predictor_starting_windows():
    x = torch.randn(1, 3, 3, 32)
    # the direct and offset predictors start at init_extent of each scale's
    # window (the direct one whatever its gain); the enhanced anchors start
    # at their mean
    for predictor in (dict(type='DirectExtents', gain=1.),
                      dict(type='DirectExtents', gain=10.),
                      dict(type='OffsetExtents')):
        layer = ReconstructedWindowAttention(
            32, 4, (8, ), window_predictor=dict(predictor, init_extent=0.5))
        layer.init_weights()
        expected = layer.window_pred.extent_limits * 0.5
        assert torch.allclose(layer.window_pred(x)[0, 0, 0], expected,
                              atol=1e-6)
    layer = _layer(scale_windows=(9, ),
                   window_predictor='EnhancedAnchorExtents')
    anchors = layer.window_pred.anchors
    assert anchors.shape == (8, 4)
    assert torch.allclose(layer.window_pred(x)[0, 0, 0, 0],
                          anchors.mean(0) * 4)


def test_predictor_gain_scales_the_predictors_output():
    """The gain multiplies the logits: the same weights with gain 10 give
    the extents of 10x the weights at gain 1 (what a 10x learning rate on
    the predictor reaches)."""
    x = torch.randn(1, 4, 4, 32)
    a, b = (DirectExtents(32, (9, ), gain=gain) for gain in (1., 10.))
    with torch.no_grad():
        w = torch.randn_like(a.linear.weight) * 0.01
        b.linear.weight.copy_(w)
        b.linear.bias.normal_()
        a.linear.weight.copy_(w * 10)
        a.linear.bias.copy_(b.linear.bias * 10)
    assert torch.allclose(a(x), b(x), atol=1e-5)


def test_mlp_reconstruction_takes_no_global_tokens():
    layer = ReconstructedWindowAttention(
        32, 4, window_predictor=None,
        reconstruction=dict(type='MLPReweighting'))
    with pytest.raises(ValueError, match='global tokens'):
        layer(torch.randn(1, 4, 4, 32), global_tokens=torch.randn(1, 1, 32))


@pytest.mark.parametrize('fusion', ['GateFusion', 'ConcatFusion'])
def test_class_token_attends_every_pixel_and_pixels_ignore_it(fusion):
    block = RSWAttBlock(32, 4, (3, 5), attn_cfg=dict(fusion=dict(type=fusion)))
    block.attn.init_weights()
    block.eval()
    H, W = 6, 7
    x = torch.randn(2, 1 + H * W, 32)
    out = block(x, (H, W))
    # the pixels' outputs do not depend on the class token
    alone = block(x[:, 1:], (H, W))
    assert torch.allclose(out[:, 1:], alone, atol=1e-5)
    # the class token: softmax attention over [cls; every pixel]
    attn, y = block.attn, block.norm1(x)
    heads, d = attn.num_heads, 32 // attn.num_heads
    q, k, v = attn.qkv(y).view(2, -1, 3, heads, d).permute(2, 0, 3, 1,
                                                           4).unbind(0)
    w = (q[:, :, :1] @ k.transpose(-1, -2) * d**-0.5).softmax(-1)
    g = (w @ v).transpose(1, 2).reshape(2, 1, 32)
    if fusion == 'ConcatFusion':
        g = attn.fusion(None, [g] * 2)
    expected = x[:, :1] + attn.proj(g)
    expected = expected + block.mlp(block.norm2(expected))
    assert torch.allclose(out[:, :1], expected, atol=1e-5)


def test_pixel_position_encoding_starts_as_sinusoids_and_resizes():
    from mmpretrain.models.utils import build_2d_sincos_position_embedding
    enc = PixelPositionEncoding(64, (14, 14))
    enc.init_weights()
    assert torch.allclose(enc.table,
                          build_2d_sincos_position_embedding((14, 14), 64))
    x = torch.zeros(2, 14 * 14, 64)
    assert torch.allclose(enc(x, (14, 14)), enc.table.expand(2, -1, -1))
    assert enc(torch.zeros(1, 10 * 20, 64), (10, 20)).shape == (1, 200, 64)
    (enc(torch.zeros(1, 6 * 5, 64), (6, 5))**2).sum().backward()
    assert enc.table.grad.abs().sum() > 0  # learnable through the resize
    with pytest.raises(ValueError, match='multiple of 4'):
        PixelPositionEncoding(30, (7, 7))


def test_rswatt_vit_presets_outputs_and_freezing():
    torch.manual_seed(0)
    model = RSWAttViT()  # the source's example: 768 wide, 6 layers
    assert len(model.layers) == 6 and model.embed_dims == 768
    assert model.layers[0].attn.scale_windows == (4, 8, 16)
    assert type(model.layers[0].attn.fusion).__name__ == 'ConcatFusion'
    assert type(model.layers[0].attn.window_pred).__name__ == \
        'OffsetExtents'
    tiny = RSWAttViT('tiny', img_size=64, frozen_stages=2,
                     out_type='featmap')
    tiny.init_weights()
    x = torch.randn(2, 3, 80, 96)  # another size: position enc resized
    (feat, ) = tiny(x)
    assert feat.shape == (2, 192, 5, 6)
    frozen = [n for n, p in tiny.named_parameters() if not p.requires_grad]
    assert 'cls_token' in frozen and 'patch_embed.proj.weight' in frozen
    assert any(n.startswith('layers.1.') for n in frozen)
    assert not any(n.startswith('layers.2.') for n in frozen)
    tiny.out_type = 'cls_token'
    (cls, ) = tiny(x)
    assert cls.shape == (2, 192)
    # Gradient into a predictor through the pixel features: at init the
    # class token hardly depends on the windows (its gradient there is
    # ~1e-9, exactly 0 for some seeds, so an order-dependent check).
    tiny.out_type = 'featmap'
    (feat, ) = tiny(x)
    feat.square().sum().backward()
    assert tiny.layers[5].attn.window_pred.mlp[-1].weight.grad.abs().sum() \
        > 0
    with pytest.raises(ValueError, match='out_type'):
        RSWAttViT('tiny', out_type='tokens')
    with pytest.raises(ValueError, match='unknown arch'):
        RSWAttViT('huge')


# ---------------------------------------------------------------- configs
def test_cifar10_config_is_the_sources_recipe():
    """As the Runner builds it: model, optimizer, schedule and data."""
    from mmengine.optim import build_optim_wrapper
    cfg = Config.fromfile(
        osp.join(CONFIGS, 'rswatt-vit-b6-p16_1xb32-10e_cifar10-224px.py'))
    init_default_scope('mmpretrain')
    from mmpretrain.registry import MODELS
    model = MODELS.build(cfg.model)
    assert type(model.backbone).__name__ == 'RSWAttViT'
    assert len(model.backbone.layers) == 6
    assert model.backbone.embed_dims == 768
    assert model.backbone.pos_embed is not None
    assert model.head.num_classes == 10
    optim = build_optim_wrapper(model, cfg.optim_wrapper)
    group = optim.optimizer.param_groups[0]
    assert type(optim.optimizer).__name__ == 'AdamW'
    assert group['lr'] == 1e-4 and group['weight_decay'] == 0.01
    assert cfg.param_scheduler == []
    assert cfg.train_cfg.max_epochs == 10
    assert cfg.train_dataloader.batch_size == 32
    assert cfg.train_dataloader.dataset.type == 'CIFAR10'
    assert cfg.train_dataloader.dataset.data_root == 'data/cifar10'
    assert cfg.train_dataloader.dataset.pipeline[0] == dict(type='Resize',
                                                            scale=224)
    pre = cfg.data_preprocessor
    assert pre.mean == [123.675, 116.28, 103.53]
    assert pre.std == [58.395, 57.12, 57.375]


@pytest.mark.slow
def test_rswatt_vit_loss_step_on_a_cifar_format_set(tmp_path, monkeypatch):
    """The config on a small set in CIFAR-10's pickle format, written here,
    read by mmpretrain's CIFAR10 (checksums off): one loss step on what the
    Runner builds (the classifier family's end-to-end run through the tools
    is tests/test_classification.py's Swin-T). RSWAttViT 'tiny' keeps it
    CPU-sized; everything else is the config's."""
    monkeypatch.syspath_prepend(HELPERS)  # the config imports cifar_sample
    from cifar_sample import write_cifar_sample
    root = write_cifar_sample(str(tmp_path / 'cifar10'), per_batch=2,
                              test=6)
    config = tmp_path / 'cifar.py'
    config.write_text(f'''
_base_ = {osp.join(CONFIGS, 'rswatt-vit-b6-p16_1xb32-10e_cifar10-224px.py')!r}
custom_imports = dict(imports=['mmvisattn', 'cifar_sample'],
                      allow_failed_imports=False)
model = dict(backbone=dict(arch='tiny'), head=dict(in_channels=192))
dataset = dict(type='CIFAR10Sample', data_root={root!r}, download=False)
train_dataloader = dict(batch_size=5, num_workers=0,
                        persistent_workers=False, dataset=dataset)
val_dataloader = dict(batch_size=3, num_workers=0, persistent_workers=False,
                      dataset=dataset)
test_dataloader = val_dataloader
train_cfg = dict(max_epochs=1)
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
''')
    step = runner_loss_step(config, tmp_path / 'work',
                            moves=('backbone.', 'head.'))
    assert set(step.losses) == {'loss'}, step.losses


@pytest.mark.slow
def test_retinanet_rswatt_neck_loss_step_on_coco128(tmp_path):
    path = osp.join(CONFIGS, 'retinanet_r50-rswatt-neck_fpn_1x_coco.py')
    cfg = Config.fromfile(path)
    neck = cfg.model.neck
    assert [n['type'] for n in neck] == ['FPN', 'mmvisattn.RSWAttNeck']
    assert neck[1]['num_levels'] == cfg.model.neck[0]['num_outs'] == 5
    anchors = cfg.model.bbox_head.anchor_generator  # 9 per position
    assert anchors.scales_per_octave * len(anchors.ratios) == 9
    loss_step_on_coco128(path, tmp_path, mask=False)


@pytest.mark.slow
@pytest.mark.parametrize('name', [
    'rswatt-head_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py',
    'rswatt-head_rswatt-t_8xb2-160k_ade20k-512x512.py'])
def test_rswatt_decoder_configs_loss_step_on_camvid_ade(name, tmp_path):
    cfg = Config.fromfile(osp.join(CONFIGS, name))
    head = cfg.model.decode_head
    assert (head.type, head.channels, head.num_layers, head.num_heads) == (
        'mmvisattn.RSWAttHead', 256, 4, 8)
    if 'rswatt-t' in name:  # the same backbone as upernet_rswatt-t
        upernet = Config.fromfile(osp.join(
            CONFIGS, 'upernet_rswatt-t_8xb2-160k_ade20k-512x512.py'))
        assert cfg.model.backbone == upernet.model.backbone
    loss_step_on_camvid(osp.join(CONFIGS, name), tmp_path)


# ------------------------------------------------------------------ tools
def test_object_sizes_are_connected_regions():
    import numpy as np
    tool = load_tool('dev/rswatt_extents.py')
    label = np.zeros((6, 8), np.uint8)
    label[0:2, 0:2] = 1  # 4 pixels
    label[4:6, 5:8] = 1  # 6 pixels, same class, separate region
    label[2:5, 0:3] = 2  # 9 pixels
    sizes = tool.object_sizes(label)
    assert sizes[0, 0] == 4 and sizes[5, 7] == 6 and sizes[3, 1] == 9
    assert sizes[0, 7] == 0


def test_extents_tool_correlates_windows_with_objects(tmp_path, capsys):
    from helpers import generate_shapes
    root = str(tmp_path / 'shapes')
    generate_shapes(root, num_train=1, num_val=2, size=(64, 64))
    tool = load_tool('dev/rswatt_extents.py')
    out = tmp_path / 'extents.png'
    tool.main([
        osp.join(REPO, 'configs', 'demo', 'upernet_rswatt-n_shapes-ade.py'),
        '--checkpoints', 'init', '--images',
        osp.join(root, 'ade', 'images', 'validation'), '--annotations',
        osp.join(root, 'ade', 'annotations', 'validation'), '--size', '64',
        '--out', str(out)
    ])
    printed = capsys.readouterr().out
    # zero-initialised predictors: every window the same, no correlation
    assert re.search(r'largest window 9: window area / M\^2 on objects '
                     r'0\.\d+, on background 0\.\d+; Spearman rho\(area, '
                     r'object size\) \+?nan', printed), printed
    assert out.stat().st_size > 1000


def test_ablation_variants_build_what_they_say(tmp_path):
    tool = load_tool('dev/rswatt_ablation.py')
    init_default_scope('mmseg')
    from mmseg.registry import MODELS
    built = {}
    for name in tool.VARIANTS:
        cfg = Config.fromfile(tool.variant_config(str(tmp_path), name))
        built[name] = MODELS.build(cfg.model).backbone
    attn = {n: b.layers[0].blocks[0].attn for n, b in built.items()}
    assert attn['fixed'].window_pred is None
    assert attn['fixed'].scale_windows == attn['adaptive'].scale_windows == (
        9, )
    assert attn['adaptive'].window_pred is not None
    assert attn['ms-gate'].scale_windows == (5, 9)
    assert attn['ms-gate'].fusion.gate is not None
    assert type(attn['ms-concat'].fusion).__name__ == 'ConcatFusion'
    assert type(built['swin']).__name__ == 'SwinTransformer'
    assert built['swin'].out_channels == built['fixed'].out_channels


@pytest.mark.slow  # the benchmark's timed rounds
def test_vit_benchmark_prints_both_models_and_the_ratios(capsys):
    tool = load_tool('tools/analysis_tools/benchmark_rswatt_vit.py')
    tool.main(['--arch', 'tiny', '--size', '64', '--runs', '1', '--rounds',
               '2', '--device', 'cpu'])
    out = capsys.readouterr().out
    assert re.search(r'\| RSWAttViT tiny \| [\d.]+M \| [\d.]+G \| [\d.]+ \|',
                     out), out
    assert re.search(r'\| mmpretrain ViT, same size, global attention '
                     r'\(peer\) \| 5\.[\d]M \|', out), out
    assert re.search(r'per round: [\d.]+, [\d.]+; median [\d.]+', out), out


@pytest.mark.parametrize('predictor', PREDICTORS)
def test_variants_under_inference_mode_and_bf16_autocast(predictor):
    """Every predictor and both fusions in the modes a model meets: train
    with bf16 autocast (finite gradients), eval under inference_mode (the
    same result as under no_grad), then training again."""
    model = RSWAttViT(dict(embed_dims=32, depth=2, num_heads=2),
                      img_size=32, scale_windows=(2, 4),
                      attn_cfg=dict(window_predictor=dict(type=predictor),
                                    fusion=dict(type='ConcatFusion')))
    model.init_weights()
    x = torch.randn(2, 3, 48, 32)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        (cls, ) = model(x)
    cls.float().pow(2).sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    model.eval()
    with torch.inference_mode():
        (a, ) = model(x)
    with torch.no_grad():
        (b, ) = model(x)
    assert torch.equal(a, b)
    model.train()
    model(x)[0].sum().backward()  # no inference tensors left behind
