"""RSWAtt: the reconstructed sliding-window kernel against sliding-window
attention and a direct per-query evaluation of its formula, its window
bounds, gradients into the window predictor, the block and the backbone,
and the Cascade Mask R-CNN / UperNet configs on coco128 / camvid_ade."""
import os.path as osp

import pytest
import torch
import torch.nn.functional as F

from helpers import REPO, load_tool
from helpers.camvid import loss_step_on_camvid
from helpers.coco128 import loss_step_on_coco128
from mmvisattn.models.backbones import RSWAttTransformer
from mmvisattn.models.layers import ReconstructedWindowAttention
from mmvisattn.ops import (
    reconstructed_window_attention,
    sliding_window_attention_naive,
)


def _qkv(B=2, heads=3, H=9, W=11, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, heads, H, W, d, generator=g) for _ in range(3)]


def _full(M, B, H, W):
    return torch.tensor([M // 2, M - 1 - M // 2] * 2,
                        dtype=torch.float).expand(B, H, W, 4)


@pytest.mark.parametrize('M', [3, 4, 7, 8])
def test_full_extents_at_zero_temperature_is_sliding_window(M):
    q, k, v = _qkv(H=13, W=10)
    bias = torch.randn(3, M * M)
    got = reconstructed_window_attention(q, k, v, M, _full(M, 2, 13, 10),
                                         temperature=1e-4, bias=bias)
    expected = sliding_window_attention_naive(q, k, v, M, bias=bias)
    assert torch.allclose(got, expected, atol=1e-5)


def test_smaller_extents_are_a_smaller_sliding_window():
    q, k, v = _qkv()
    ones = torch.ones(2, 9, 11, 4)
    got = reconstructed_window_attention(q, k, v, 9, ones, temperature=1e-4)
    assert torch.allclose(got, sliding_window_attention_naive(q, k, v, 3),
                          atol=1e-5)


def _direct(q, k, v, M, extents, temperature, bias):
    """The module doc's formula, one query at a time, over the image."""
    B, heads, H, W, d = q.shape
    out = torch.zeros_like(q)
    before = M // 2
    for b in range(B):
        for y in range(H):
            for x in range(W):
                left, right, top, bottom = extents[b, y, x]
                logits, values = [], []
                for ky in range(H):
                    for kx in range(W):
                        oy, ox = ky - y, kx - x
                        if not (-before <= oy < M - before
                                and -before <= ox < M - before):
                            continue  # outside the largest window
                        m = (torch.sigmoid((ox + left + .5) / temperature) *
                             torch.sigmoid((right + .5 - ox) / temperature) *
                             torch.sigmoid((oy + top + .5) / temperature) *
                             torch.sigmoid((bottom + .5 - oy) / temperature))
                        index = (oy + before) * M + ox + before
                        logit = (q[b, :, y, x] * k[b, :, ky, kx]).sum(-1) * \
                            d**-0.5 + bias[:, index] + torch.log(m)
                        logits.append(logit)
                        values.append(v[b, :, ky, kx])
                attn = torch.stack(logits, -1).softmax(-1)  # (heads, n)
                out[b, :, y, x] = (attn[..., None] *
                                   torch.stack(values, 1)).sum(1)
    return out


def test_soft_windows_match_the_formula_evaluated_directly():
    q, k, v = _qkv(B=1, heads=2, H=6, W=7, d=4, seed=1)
    M = 5
    g = torch.Generator().manual_seed(2)
    extents = torch.rand(1, 6, 7, 4, generator=g) * 2
    bias = torch.randn(2, M * M, generator=g)
    got = reconstructed_window_attention(q, k, v, M, extents, 0.7, bias,
                                         tile=3)
    assert torch.allclose(got, _direct(q, k, v, M, extents, 0.7, bias),
                          atol=1e-5)


def test_no_query_attends_outside_its_largest_window():
    """A value planted at one pixel reaches only the queries whose M x M
    neighbourhood holds it, whatever the extents and temperature."""
    M, H, W = 5, 12, 12
    q, k, _ = _qkv(B=1, heads=1, H=H, W=W, d=4)
    v = torch.zeros(1, 1, H, W, 4)
    v[0, 0, 6, 6] = 1.
    extents = torch.full((1, H, W, 4), 50.)  # asks for far more than M
    out = reconstructed_window_attention(q, k, v, M, extents, 5.0)
    reached = out[0, 0].abs().sum(-1) > 0
    expected = torch.zeros(H, W, dtype=torch.bool)
    expected[6 - 2:6 + 3, 6 - 2:6 + 3] = True
    assert torch.equal(reached, expected)


def test_gradients_reach_the_extents_and_the_window_predictor():
    q, k, v = _qkv()
    extents = (_full(5, 2, 9, 11) * 0.6).requires_grad_(True)
    reconstructed_window_attention(q, k, v, 5, extents, 0.5).sum().backward()
    assert extents.grad.abs().sum() > 0

    torch.manual_seed(0)
    attn = ReconstructedWindowAttention(32, 4, scale_windows=(3, 7))
    attn.init_weights()
    x = torch.randn(2, 10, 12, 32)
    out, ext, _ = attn(x)
    assert out.shape == x.shape and ext.shape == (2, 10, 12, 2, 4)
    # the predictor starts at 3/4 of each scale's largest window
    assert torch.allclose(ext[..., 1, :], torch.full_like(ext[..., 1, :],
                                                          2.25))
    (out**2).sum().backward()
    for p in (attn.window_pred.linear.weight, attn.window_pred.linear.bias,
              attn.fusion.gate.weight,
              attn.relative_position_bias_tables[0]):
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_anchor_predictor_mixes_anchor_windows():
    attn = ReconstructedWindowAttention(
        16, 2, scale_windows=(9, ), window_predictor=dict(type='AnchorExtents'))
    attn.init_weights()
    ext = attn.window_pred(torch.randn(1, 4, 4, 16))
    # zero init: the mean of the anchors, times the largest extents (4)
    mean = attn.window_pred.anchors.mean(0) * 4
    assert torch.allclose(ext[0, 0, 0, 0], mean)
    with pytest.raises(ValueError, match="window_predictor: type='Boxes'"):
        ReconstructedWindowAttention(16, 2,
                                     window_predictor=dict(type='Boxes'))


def test_kernel_refuses_bad_arguments():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match='extents must be'):
        reconstructed_window_attention(q, k, v, 5, torch.zeros(2, 9, 11))
    with pytest.raises(ValueError, match='temperature'):
        reconstructed_window_attention(q, k, v, 5, _full(5, 2, 9, 11), 0.)


def test_scale_windows_is_an_int_or_one_per_scale():
    """One name for the window everywhere: an int is one scale; the old
    plural spelling is an unexpected keyword; a bad window is named."""
    assert ReconstructedWindowAttention(16, 2, scale_windows=5).scale_windows \
        == (5, )
    with pytest.raises(TypeError, match='scale_windowss'):
        RSWAttTransformer(arch='nano', scale_windowss=(3, 5))
    for bad in (0, (3, 0), (), (3.5, )):
        with pytest.raises(ValueError, match='scale_windows'):
            ReconstructedWindowAttention(16, 2, scale_windows=bad)


@pytest.mark.parametrize('hw', [(64, 64), (70, 45), (20, 20)])
def test_backbone_pyramid(hw):
    torch.manual_seed(0)
    model = RSWAttTransformer(arch='nano', scale_windows=(3, 5))
    model.init_weights()
    model.eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *hw))
    for i, out in enumerate(outs):
        stride = 4 * 2**i
        assert out.shape == (1, 64 * 2**i, -(-hw[0] // stride),
                             -(-hw[1] // stride))


def test_backbone_training_options():
    torch.manual_seed(0)
    model = RSWAttTransformer(arch='nano', scale_windows=(3, ),
                              frozen_stages=1, with_cp=True,
                              out_indices=(1, 3))
    model.init_weights()
    model.train()
    assert not model.patch_embed.proj.weight.requires_grad
    assert not any(p.requires_grad for p in model.layers[0].parameters())
    outs = model(torch.randn(2, 3, 48, 48))
    assert [o.shape[1] for o in outs] == [128, 512]
    sum(o.sum() for o in outs).backward()
    assert model.layers[1].blocks[0].attn.window_pred.linear.weight.grad \
        is not None
    with pytest.raises(ValueError, match='arch'):
        RSWAttTransformer(arch='huge')
    with pytest.raises(ValueError, match='out_indices'):
        RSWAttTransformer(arch='nano', out_indices=(4, ))


def _paper_formula(q, k, v, M, logit_scale, mlp, bias):
    """``MLPReweighting`` written out per query: cosine logits x learned
    temperature + bias over the M x M window (inside the image), softmax,
    plus the MLP of the weights over the window positions, times V."""
    B, heads, H, W, d = q.shape
    before = M // 2
    out = torch.zeros_like(q)
    qn, kn = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    for b in range(B):
        for y in range(H):
            for x in range(W):
                logits = torch.full((heads, M * M), float('-inf'))
                values = torch.zeros(heads, M * M, d)
                for i in range(M):
                    for j in range(M):
                        ky, kx = y + i - before, x + j - before
                        if 0 <= ky < H and 0 <= kx < W:
                            logits[:, i * M + j] = (
                                (qn[b, :, y, x] * kn[b, :, ky, kx]).sum(-1) *
                                logit_scale + bias[:, i * M + j])
                            values[:, i * M + j] = v[b, :, ky, kx]
                attn = logits.softmax(-1)
                inside = torch.isfinite(logits)
                attn = attn + mlp(attn) * inside
                out[b, :, y, x] = (attn[..., None] * values).sum(1)
    return out


def test_mlp_reconstruction_matches_the_papers_formula():
    torch.manual_seed(3)
    layer = ReconstructedWindowAttention(
        8, 2, scale_windows=(5, ), window_predictor=None,
        reconstruction=dict(type='MLPReweighting'))
    layer.init_weights()
    mlp = layer.reconstruction
    for p in mlp.reweight.parameters():  # a non-trivial MLP
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(1, 6, 7, 8)
    got, extents, _ = layer(x)
    assert extents is None
    with torch.no_grad():
        # 1x1 conv, then 3x3 depthwise
        conv1, depthwise = layer.qkv
        assert depthwise.groups == 24 and depthwise.kernel_size == (3, 3)
        qkv = depthwise(conv1(x.permute(0, 3, 1, 2))).permute(0, 2, 3, 1)
        q, k, v = qkv.reshape(1, 6, 7, 3, 2, 4).permute(3, 0, 4, 1, 2,
                                                        5).unbind(0)
        bias = layer.relative_position_bias_tables[0][
            layer.relative_index_5].t()
        ref = _paper_formula(q, k, v, 5, mlp.logit_scale.exp(),
                             mlp.reweight[0], bias)
        expected = layer.proj(ref.permute(0, 2, 3, 1, 4).reshape(1, 6, 7, 8))
    assert torch.allclose(got, expected, atol=1e-5)
    assert layer.window_pred is None
    (got**2).sum().backward()
    assert mlp.reweight[0][0].weight.grad.abs().sum() > 0
    assert mlp.logit_scale.grad.abs().sum() > 0


# ------------------------------------------ detection and segmentation
RSWATT_CONFIGS = osp.join(REPO, 'configs', 'rswatt')


@pytest.mark.slow
def test_cascade_mask_rcnn_rswatt_loss_step_on_coco128(tmp_path):
    loss_step_on_coco128(
        osp.join(RSWATT_CONFIGS, 'cascade-mask-rcnn_rswatt-t_fpn_giou-'
                 '4conv1f_ms-crop-3x_coco.py'), tmp_path)


@pytest.mark.slow
def test_upernet_rswatt_loss_step_on_camvid_ade(tmp_path):
    loss_step_on_camvid(
        osp.join(RSWATT_CONFIGS,
                 'upernet_rswatt-t_8xb2-160k_ade20k-512x512.py'), tmp_path)


# ------------------------------------------------------------ plug-ins
def test_resnet_plugin_starts_as_the_plain_resnet_and_learns():
    from mmdet.models.backbones import ResNet
    plugins = [dict(cfg=dict(type='mmvisattn.RSWAttPlugin',
                             scale_windows=(3, 5)),
                    stages=(False, True, True, True),
                    position='after_conv2')]
    torch.manual_seed(0)
    plain = ResNet(depth=50, out_indices=(0, 1, 2, 3))
    plain.eval()  # mmdet's ResNet.train() returns None: no chaining
    with_plugin = ResNet(depth=50, out_indices=(0, 1, 2, 3),
                         plugins=plugins)
    with_plugin.init_weights()
    missing = with_plugin.load_state_dict(plain.state_dict(), strict=False)
    assert all('rswatt' in k for k in missing.missing_keys), missing
    assert not missing.unexpected_keys
    with_plugin.eval()
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        for a, b in zip(plain(x), with_plugin(x)):
            assert torch.allclose(a, b, atol=1e-5)  # gamma starts at 0
    with_plugin.train()
    sum(o.sum() for o in with_plugin(x)).backward()
    gammas = [m.gamma for m in with_plugin.modules()
              if m.__class__.__name__ == 'RSWAttPlugin']
    assert len(gammas) == 4 + 6 + 3
    assert all(g.grad is not None and g.grad.abs().sum() > 0 for g in gammas)


def test_rswatt_neck_keeps_every_level():
    from mmvisattn.models.plugins import RSWAttNeck
    neck = RSWAttNeck(in_channels=32, num_levels=3, scale_windows=(3, ),
                      init_scale=0.5)
    neck.init_weights()
    feats = tuple(torch.randn(2, 32, s, s) for s in (16, 8, 4))
    outs = neck(feats)
    assert [o.shape for o in outs] == [f.shape for f in feats]
    assert not torch.allclose(outs[0], feats[0])
    with pytest.raises(ValueError, match='num_levels'):
        neck(feats[:2])


@pytest.mark.slow
def test_cascade_mask_rcnn_r50_with_the_plugin_loss_step_on_coco128(tmp_path):
    loss_step_on_coco128(
        osp.join(RSWATT_CONFIGS, 'cascade-mask-rcnn_r50-rswatt-c3-c5_fpn_'
                 'giou-4conv1f_ms-crop-3x_coco.py'), tmp_path)


@pytest.mark.slow
def test_rswatt_decoder_on_swin_t_loss_step_on_camvid_ade(tmp_path):
    loss_step_on_camvid(
        osp.join(RSWATT_CONFIGS, 'upernet-rswatt-head_swin-t-p4-w7_8xb2-'
                 '160k_ade20k-512x512.py'), tmp_path)


def test_extents_tool_plots_the_predicted_windows(tmp_path):
    import numpy as np
    from PIL import Image
    image = tmp_path / 'img.png'
    Image.fromarray((np.random.RandomState(0).rand(40, 56, 3) * 255).astype(
        'uint8')).save(image)
    tool = load_tool('dev/rswatt_extents.py')
    out = tmp_path / 'extents.png'
    tool.main([
        osp.join(REPO, 'configs', 'demo', 'upernet_rswatt-n_shapes-ade.py'),
        '--checkpoints', 'init', '--images', str(image), '--size', '48',
        '--out', str(out)
    ])
    assert out.stat().st_size > 1000
    with pytest.raises(FileNotFoundError, match='no image'):
        tool.main([
            osp.join(REPO, 'configs', 'demo',
                     'upernet_rswatt-n_shapes-ade.py'), '--checkpoints',
            'init', '--images', str(tmp_path / 'missing.png')
        ])

