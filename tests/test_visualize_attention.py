"""tools/analysis_tools/visualize_attention.py: the attention numbers behind
its figures (recomputed probabilities reproduce the modules, Swin windows
and shift masks, TNT rows summing to 1, RSWAtt extents in their limits), the
figures themselves and its errors."""
import glob
import os.path as osp

import numpy as np
import pytest
import torch
from PIL import Image

from helpers import REPO, generate_shapes, load_tool
from mmvisattn.models.layers import GlobalAttention, WindowAttention
from mmvisattn.ops import (
    padding_key_mask,
    shifted_window_mask,
    window_attention,
    window_attention_weights,
    window_layout,
)

tool = load_tool('tools/analysis_tools/visualize_attention.py')
SWIN_CONFIG = osp.join(REPO, 'configs', 'demo',
                       'cascade-mask-rcnn_swin-t_shapes.py')


@pytest.fixture(scope='module')
def image(tmp_path_factory):
    root = generate_shapes(str(tmp_path_factory.mktemp('shapes')),
                           num_train=1, num_val=0, size=(96, 96))
    return sorted(glob.glob(osp.join(root, 'images', 'train', '*.png')))[0]


@pytest.fixture(scope='module')
def swin():
    torch.manual_seed(0)
    return tool.build_backbone('swin')[0]


@pytest.fixture(scope='module')
def rswatt():
    torch.manual_seed(0)
    return tool.build_backbone('rswatt')[0]


def test_window_attention_weights_match_kernel():
    torch.manual_seed(0)
    B, nW, h, N, d = 2, 4, 3, 16, 8
    q, k, v = (torch.randn(B, nW, h, N, d) for _ in range(3))
    bias = torch.randn(h, N, N)
    layout = window_layout(6, 6, 4, 2, 'padding')
    masks = (None, shifted_window_mask(8, 8, 4, 2),
             padding_key_mask(layout.frame_valid))
    for mask in masks:
        for use_content in (True, False):
            probs = window_attention_weights(q, k, bias, mask, 0.3,
                                             use_content)
            assert probs.shape == (B, nW, h, N, N)
            torch.testing.assert_close(probs.sum(-1),
                                       torch.ones(B, nW, h, N))
            torch.testing.assert_close(
                probs @ v,
                window_attention(q, k, v, bias, mask, 0.3,
                                 use_content=use_content),
                atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('shift_mode,shift', [('cyclic', 0), ('cyclic', 2),
                                              ('padding', 2), ('none', 2)])
def test_swin_probs_reproduce_the_module(shift_mode, shift):
    """probs @ v, projected and put back in place, is the module's output:
    the tool recomputes what the block computed (map 6x7 is padded)."""
    torch.manual_seed(0)
    attn = WindowAttention(16, 2, 4, shift_size=shift,
                           shift_mode=shift_mode).eval()
    attn.init_weights()
    x = torch.randn(2, 6, 7, 16)
    with torch.no_grad():
        found = tool.swin_window_probs(attn, x)
        B, nW, heads, N, d = found.v.shape
        out = (found.probs @ found.v).transpose(2, 3).reshape(B, nW * N, -1)
        out = attn.proj(out).index_select(1, found.layout.scatter_index)
        torch.testing.assert_close(out.view(x.shape), attn(x),
                                   atol=1e-5, rtol=1e-5)


def test_swin_regular_window_attention(swin):
    """112 px, stage 1: a 14x14 map, 2x2 windows of 7, no padding."""
    img = torch.randn(1, 3, 112, 112)
    att = tool.swin_query_attention(swin, img, (70, 20), stage=1, block=0)
    assert att.weights.shape == (14, 14) and att.token == (2, 8)
    assert att.stride == 8 and att.shift_size == 0
    expected = np.zeros((14, 14), bool)
    expected[0:7, 7:14] = True
    np.testing.assert_array_equal(att.window, expected)
    np.testing.assert_array_equal(att.allowed, expected)
    assert att.padding_weight == 0
    np.testing.assert_allclose(att.weights.sum(), 1, atol=1e-5)
    assert (att.weights[~expected] == 0).all()
    assert (att.weights[expected] > 0).all()


@pytest.mark.parametrize('query,token,rows', [
    ((111, 108), (13, 13), slice(10, 14)),
    ((108, 8), (1, 13), slice(0, 3)),
])
def test_swin_shifted_window_masks_other_regions(swin, query, token, rows):
    """A query in the bottom-right cyclic window of a shifted block: the
    window holds rows and columns 10..13 and, rolled in, 0..2 (A/B/C);
    the query attends only its own region of the shifted grid: columns
    10..13, rows 10..13 (bottom-right query) or 0..2 (top-right query)."""
    img = torch.randn(1, 3, 112, 112)
    att = tool.swin_query_attention(swin, img, query, stage=1, block=1)
    assert att.token == token and att.shift_size == 3
    wrapped = np.r_[10:14, 0:3]
    expected_window = np.zeros((14, 14), bool)
    expected_window[np.ix_(wrapped, wrapped)] = True
    np.testing.assert_array_equal(att.window, expected_window)
    corner = np.zeros((14, 14), bool)
    corner[rows, 10:] = True
    np.testing.assert_array_equal(att.allowed, corner)
    np.testing.assert_allclose(att.weights.sum(), 1, atol=1e-5)
    assert att.weights[expected_window & ~corner].max() < 1e-30
    assert (att.weights[~expected_window] == 0).all()
    assert att.weights[corner].min() > 1e-4


def test_swin_padding_weight(swin):
    """96 px, stage 0: 24x24 tokens padded to 28; zero-padded keys are
    attended (as in the official code) and reported apart."""
    img = torch.randn(1, 3, 96, 96)
    att = tool.swin_query_attention(swin, img, (95, 95), stage=0, block=0)
    assert att.weights.shape == (24, 24) and att.window.sum() == 9
    assert att.padding_weight > 0
    np.testing.assert_allclose(att.weights.sum() + att.padding_weight, 1,
                               atol=1e-5)


def test_swin_errors(swin):
    img = torch.randn(1, 3, 64, 64)
    with pytest.raises(ValueError, match='--stage 4'):
        tool.swin_query_attention(swin, img, (0, 0), stage=4, block=0)
    with pytest.raises(ValueError, match='--block 2'):
        tool.swin_query_attention(swin, img, (0, 0), stage=0, block=2)
    with pytest.raises(ValueError, match='--query 64 3'):
        tool.swin_query_attention(swin, img, (64, 3), stage=0, block=0)


@pytest.mark.parametrize('shape', [(3, 5, 16), (3, 2, 3, 16)],
                         ids=['sequence', 'map'])
def test_global_probs_reproduce_global_attention(shape):
    """The one global attention, on TNT's sequences and Swin's maps: its
    probabilities times the values, projected, are its output."""
    torch.manual_seed(0)
    attn = GlobalAttention(16, 2).eval()
    x = torch.randn(shape)
    with torch.no_grad():
        probs = attn.probabilities(x)
        tokens = x.reshape(3, -1, 16)
        v = attn.qkv(tokens).view(3, -1, 3, 2, 8)[:, :, 2].transpose(1, 2)
        out = attn.proj((probs @ v).transpose(1, 2).reshape(shape))
        torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=1e-5)


def test_tnt_attention_rows_sum_to_one():
    torch.manual_seed(0)
    model = tool.build_backbone('tnt')[0]
    img = torch.randn(1, 3, 64, 48)  # 4x3 sentences of 4x4 words
    att = tool.tnt_attention(model, img, (37, 22))
    assert att.sentence == (1, 2) and att.word == (1, 1)
    assert att.inner.shape == (4, 4)
    assert att.outer.shape == att.cls.shape == (4, 3)
    np.testing.assert_allclose(att.inner.sum(), 1, atol=1e-5)
    np.testing.assert_allclose(att.outer.sum() + att.outer_to_cls, 1,
                               atol=1e-5)
    np.testing.assert_allclose(att.cls.sum() + att.cls_self, 1, atol=1e-5)
    assert (att.cls > 0).all() and 0 < att.cls_self < 1
    # another block attends differently
    first = tool.tnt_attention(model, img, (37, 22), block=0)
    assert not np.allclose(first.cls, att.cls)
    with pytest.raises(ValueError, match='--block 12'):
        tool.tnt_attention(model, img, (0, 0), block=12)


def test_rswatt_extents_within_limits(rswatt):
    img = torch.randn(1, 3, 64, 64)
    attn = rswatt.layers[0].blocks[1].attn
    found = tool.rswatt_extents(rswatt, img, stage=0, block=1)
    # the predictor starts at init_extent of the largest window everywhere
    np.testing.assert_allclose(
        found.extents, np.broadcast_to(0.75 * found.limits, (16, 16, 2, 4)),
        rtol=1e-5)
    assert not attn._forward_hooks  # the tool's hook is gone
    weight = attn.window_pred.linear.weight
    original = weight.detach().clone()
    try:
        torch.manual_seed(0)
        torch.nn.init.normal_(weight, std=1.)
        found = tool.rswatt_extents(rswatt, img, stage=0, block=1)
    finally:
        with torch.no_grad():
            weight.copy_(original)
    ext = found.extents
    assert found.scale_windows == (5, 9) and found.stride == 4
    assert ext.shape == (16, 16, 2, 4) and ext.std() > 0.1
    assert (ext >= 0).all() and (ext <= found.limits + 1e-6).all()
    np.testing.assert_array_equal(found.limits, [[2, 2, 2, 2], [4, 4, 4, 4]])
    boxes = tool.extent_boxes(ext, found.stride)
    centre = (np.arange(16) + 0.5) * 4
    x0, y0, x1, y1 = np.moveaxis(boxes, -1, 0)
    cx, cy = centre[None, :, None], centre[:, None, None]
    assert ((x0 < cx) & (cx < x1) & (y0 < cy) & (cy < y1)).all()
    size = np.array([5, 9]) * 4
    assert ((x1 - x0) <= size).all() and ((y1 - y0) <= size).all()
    with pytest.raises(ValueError, match='--stage 4'):
        tool.rswatt_extents(rswatt, img, stage=4, block=0)
    with pytest.raises(ValueError, match='--block 2'):
        tool.rswatt_extents(rswatt, img, stage=3, block=2)


def _check_png(path, min_size=(300, 200)):
    with Image.open(path) as png:
        png.verify()
    with Image.open(path) as png:
        assert png.format == 'PNG'
        assert png.size[0] >= min_size[0] and png.size[1] >= min_size[1]
        assert png.size[0] <= 1200 and png.size[1] <= 1200


@pytest.mark.parametrize('model,names', [
    ('swin', ['swin_windows.png', 'swin_query_attention.png']),
    ('tnt', ['tnt_attention.png']),
    ('rswatt', ['rswatt_windows.png']),
])
def test_main_writes_figures(model, names, image, tmp_path, capsys):
    out_dir = str(tmp_path / 'out')
    written = tool.main([image, '--model', model, '--size', '64', '64',
                        '--query', '40', '20', '--out-dir', out_dir])
    assert written == [osp.join(out_dir, n) for n in names]
    printed = capsys.readouterr().out.split()
    for path in written:
        assert path in printed
        _check_png(path)


def test_config_and_checkpoint(tmp_path):
    """A config's backbone, weights from a whole detector checkpoint
    (``backbone.`` keys) and from a bare state dict."""
    config = tmp_path / 'tiny_swin.py'
    config.write_text("model = dict(backbone=dict(type='mmvisattn."
                      "SwinTransformer', arch=dict(embed_dims=16, "
                      "depths=(2, 2), num_heads=(1, 2)), out_indices=(0, 1)"
                      "))\n")
    torch.manual_seed(1)
    source, label = tool.build_backbone('swin', str(config))
    assert 'random init' in label and source.depths == (2, 2)
    detector = tmp_path / 'detector.pth'
    torch.save({'state_dict': {
        **{f'backbone.{k}': v for k, v in source.state_dict().items()},
        'neck.conv.weight': torch.zeros(1)}}, detector)
    torch.manual_seed(2)
    loaded, label = tool.build_backbone('swin', str(config), str(detector))
    assert label == f'weights: {detector}'
    for (name, a), b in zip(source.state_dict().items(),
                            loaded.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)

    torch.manual_seed(1)
    rswatt, _ = tool.build_backbone('rswatt')
    bare = tmp_path / 'rswatt.pth'
    torch.save(rswatt.state_dict(), bare)
    torch.manual_seed(2)
    loaded, label = tool.build_backbone('rswatt', checkpoint=str(bare))
    assert str(bare) in label
    for a, b in zip(rswatt.parameters(), loaded.parameters()):
        torch.testing.assert_close(a, b)


def test_errors(image, tmp_path):
    out = ['--out-dir', str(tmp_path)]
    with pytest.raises(ValueError, match='image: no file'):
        tool.main([str(tmp_path / 'missing.png'), '--model', 'swin', *out])
    with pytest.raises(ValueError, match='--query 64 10'):
        tool.main([image, '--model', 'tnt', '--size', '80', '64',
                   '--query', '64', '10', *out])
    with pytest.raises(ValueError, match='--query 3 -1'):
        tool.main([image, '--model', 'rswatt', '--query', '3', '-1', *out])
    with pytest.raises(ValueError, match='--stage: TNT has no stages'):
        tool.main([image, '--model', 'tnt', '--stage', '1', *out])
    with pytest.raises(ValueError, match='--checkpoint: no file'):
        tool.main([image, '--model', 'rswatt', '--checkpoint',
                   str(tmp_path / 'none.pth'), *out])
    with pytest.raises(ValueError, match='--config.*not a TNT'):
        tool.build_backbone('tnt', SWIN_CONFIG)
    with pytest.raises(SystemExit):  # argparse: unknown model
        tool.main([image, '--model', 'vit', *out])
