import pytest
import torch

from helpers.windows import pad_to_multiple, window_partition, window_reverse
from mmvisattn.ops import (
    relative_position_index,
    resize_relative_position_table,
    shifted_window_mask,
    window_attention,
)
from mmvisattn.ops.masks import MASK_VALUE


@pytest.mark.parametrize('window', [3, (2, 3)], ids=['square', 'rect'])
def test_window_partition_roundtrip_and_order(window):
    wh, ww = (window, window) if isinstance(window, int) else window
    x = torch.arange(2 * 6 * 9 * 1).float().view(2, 6, 9, 1)
    windows = window_partition(x, window)
    assert windows.shape == (2, (6 // wh) * (9 // ww), wh * ww, 1)
    # second window of the first image = rows 0..wh-1, cols ww..2ww-1
    assert windows[0, 1, :, 0].tolist() == \
        x[0, :wh, ww:2 * ww, 0].flatten().tolist()
    assert torch.equal(window_reverse(windows, window, (6, 9)), x)


def test_window_partition_refuses_unpadded():
    with pytest.raises(ValueError, match='multiple of window_size=4'):
        window_partition(torch.zeros(1, 5, 8, 2), 4)
    assert pad_to_multiple(torch.zeros(1, 5, 8, 2), 4).shape == (1, 8, 8, 2)


@pytest.mark.parametrize('H, W, window, shift', [
    (8, 8, 4, 2), (8, 12, (4, 6), (2, 3)), (6, 12, (2, 4), (1, 0))],
                         ids=['square', 'rect', 'rect-row-shift-only'])
def test_shifted_mask_blocks_exactly_wrapped_pairs(H, W, window, shift):
    (wh, ww), (sh, sw) = (
        (v, v) if isinstance(v, int) else v for v in (window, shift))
    mask = shifted_window_mask(H, W, window, shift)
    assert mask.shape == ((H // wh) * (W // ww), wh * ww, wh * ww)
    # Original coordinates of the tokens after the cyclic shift by -shift.
    rows = (torch.arange(H) + sh) % H
    cols = (torch.arange(W) + sw) % W
    coords = torch.stack(torch.meshgrid(rows, cols, indexing='ij'), -1)
    win = window_partition(coords.unsqueeze(0).float(), window)[0]
    for w in range(win.shape[0]):
        pos = win[w]
        # two tokens are true neighbours iff their displacement is the same
        # before and after the shift (no wrap-around between them)
        wrapped_r = (pos[:, None, 0] - pos[None, :, 0]).abs() >= wh
        wrapped_c = (pos[:, None, 1] - pos[None, :, 1]).abs() >= ww
        blocked = wrapped_r | wrapped_c
        assert torch.equal(mask[w] == MASK_VALUE, blocked)
    # cached: one tensor per feature size
    assert shifted_window_mask(H, W, window, shift) is mask


@pytest.mark.parametrize('window', [3, (2, 3)], ids=['square', 'rect'])
def test_relative_position_index_matches_definition(window):
    Mh, Mw = (window, window) if isinstance(window, int) else window
    index = relative_position_index(window)
    coords = [(i, j) for i in range(Mh) for j in range(Mw)]
    for a, (i1, j1) in enumerate(coords):
        for b, (i2, j2) in enumerate(coords):
            expected = (i1 - i2 + Mh - 1) * (2 * Mw - 1) + (j1 - j2 + Mw - 1)
            assert index[a, b] == expected
    assert index.max() == (2 * Mh - 1) * (2 * Mw - 1) - 1


def test_resize_relative_position_table():
    table = torch.randn(13 * 13, 3)
    assert resize_relative_position_table(table, 7) is table
    resized = resize_relative_position_table(table, 12)
    assert resized.shape == (23 * 23, 3)
    assert resize_relative_position_table(table, (8, 12)).shape == \
        (15 * 23, 3)
    with pytest.raises(ValueError, match='square'):
        resize_relative_position_table(torch.randn(10, 3), 7)


def test_window_attention_equals_explicit_softmax():
    torch.manual_seed(0)
    B, nW, h, N, d = 2, 4, 3, 16, 8
    q, k, v = (torch.randn(B, nW, h, N, d) for _ in range(3))
    bias = torch.randn(h, N, N)
    mask = shifted_window_mask(8, 8, 4, 2)
    out = window_attention(q, k, v, bias=bias, mask=mask)
    logits = q @ k.transpose(-1, -2) * d**-0.5 + bias + mask[None, :, None]
    ref = logits.softmax(-1) @ v
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    out = window_attention(q, k, v, bias=bias)
    ref = (q @ k.transpose(-1, -2) * d**-0.5 + bias).softmax(-1) @ v
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_neighborhood_unfold_and_inside_image_by_brute_force():
    """mmvisattn.ops.neighborhood: query (y, x)'s neighbour n = (i, j) is the
    key at (y + i - M//2, x + j - M//2), zero and 'outside' off the image."""
    from mmvisattn.ops import inside_image, unfold_neighborhood
    B, heads, H, W, d, M = 1, 2, 5, 4, 3, 4
    t = torch.randn(B, heads, H, W, d)
    nb = unfold_neighborhood(t, M)
    inside = inside_image(H, W, M, t.device)
    assert nb.shape == (B, heads, H * W, M * M, d)
    for y in range(H):
        for x in range(W):
            for i in range(M):
                for j in range(M):
                    ky, kx = y + i - M // 2, x + j - M // 2
                    ok = 0 <= ky < H and 0 <= kx < W
                    assert bool(inside[y * W + x, i * M + j]) == ok
                    want = t[:, :, ky, kx] if ok else torch.zeros(B, heads, d)
                    torch.testing.assert_close(nb[:, :, y * W + x, i * M + j],
                                               want)


def _natten_reference(q, k, v, kernel_size):
    """NATTEN's na2d (odd kernel, dilation 1, no bias) by its definition:
    query (y, x) attends the kernel_size x kernel_size keys starting at
    (clamp(y - k//2, 0, H - k), clamp(x - k//2, 0, W - k)): at the border
    the window shifts inward, so every query has k*k keys."""
    B, heads, H, W, d = q.shape
    K = kernel_size
    out = torch.empty_like(q)
    for y in range(H):
        for x in range(W):
            y0 = min(max(y - K // 2, 0), H - K)
            x0 = min(max(x - K // 2, 0), W - K)
            keys = k[:, :, y0:y0 + K, x0:x0 + K].reshape(B, heads, K * K, d)
            vals = v[:, :, y0:y0 + K, x0:x0 + K].reshape(B, heads, K * K, d)
            w = (q[:, :, y, x, None] @ keys.transpose(-1, -2) *
                 d**-0.5).softmax(-1)
            out[:, :, y, x] = (w @ vals)[:, :, 0]
    return out


@pytest.mark.parametrize('K', [3, 5])
def test_neighbourhood_border_is_masked_not_shifted_as_in_natten(K):
    """Our sliding-window kernels keep every window centred on its query and
    mask the keys beyond the image; NATTEN shifts the window inward. With
    values that are one-hot key positions the output is the attention
    distribution itself: a corner query of ours attends ceil(K/2)**2 keys
    (NATTEN: K*K), an edge query ceil(K/2)*K, all its weight on keys inside
    the image; where the centred window fits (K//2 from every border) both
    are the same, at every other query they differ."""
    from mmvisattn.ops import (
        sliding_window_attention_blocked,
        sliding_window_attention_naive,
    )
    torch.manual_seed(0)
    H, W, heads = 7, 8, 2
    q, k = (torch.randn(1, heads, H, W, 4) for _ in range(2))
    # d = H*W: value of key (i, j) is the one-hot vector of its position
    q, k = (torch.cat([t, t.new_zeros(1, heads, H, W, H * W - 4)], -1)
            for t in (q, k))
    v = torch.eye(H * W).view(1, 1, H, W, H * W).expand(1, heads, H, W,
                                                         H * W)
    ours = sliding_window_attention_blocked(q, k, v, K)
    torch.testing.assert_close(
        sliding_window_attention_naive(q, k, v, K), ours)
    natten = _natten_reference(q, k, v, K)

    def keys_attended(weights):  # (H, W): keys with a non-negligible weight
        return (weights > 1e-20).sum(-1)[0, 0]

    half = K // 2
    ys, xs = torch.arange(H)[:, None], torch.arange(W)[None, :]
    centred = ((ys.clamp(max=half) + (H - 1 - ys).clamp(max=half) + 1) *
               (xs.clamp(max=half) + (W - 1 - xs).clamp(max=half) + 1))
    assert torch.equal(keys_attended(ours), centred)
    # masked, not zero-padded: no weight goes to keys beyond the image
    torch.testing.assert_close(ours.sum(-1), torch.ones(1, heads, H, W))
    assert int(keys_attended(ours)[0, 0]) == ((K + 1) // 2)**2
    assert int(keys_attended(ours)[0, W // 2]) == (K + 1) // 2 * K
    assert torch.equal(keys_attended(natten), torch.full((H, W), K * K))
    interior = (slice(None), slice(None), slice(half, H - half),
                slice(half, W - half))
    torch.testing.assert_close(ours[interior], natten[interior])
    border = torch.ones(H, W, dtype=torch.bool)
    border[half:H - half, half:W - half] = False
    gap = (ours - natten).abs().amax((0, 1, 4))  # (H, W)
    assert bool((gap[border] > 1e-3).all()), gap


@pytest.mark.parametrize('learned_bias', [False, True])
def test_bf16_attention_on_cpu_is_spelled_out_and_matches_fp32(learned_bias):
    """attend() in bf16 on the CPU with window-sized rows takes the
    spelled-out path (faster there than the fused kernel) and stays in
    bf16; outputs and gradients (q, k, v and a learned bias) equal fp32
    SDPA within bf16's rounding; under autocast too."""
    import mmvisattn.ops.attention as attention
    torch.manual_seed(0)
    q, k, v = (torch.randn(6, 3, 49, 32, requires_grad=True)
               for _ in range(3))
    bias = (0.02 * torch.randn(3, 49, 49)).requires_grad_(learned_bias)
    mask = bias + torch.where(torch.rand(6, 1, 49, 49) < 0.2, MASK_VALUE, 0.)
    assert attention._low_precision_on_cpu(q.bfloat16(), k.bfloat16())
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask)
    ref_grads = torch.autograd.grad(ref.square().sum(), [q, k, v] +
                                    ([bias] if learned_bias else []))
    for autocast in (False, True):
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            out = attention.attend(q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                   attn_mask=mask)
        assert out.dtype == torch.bfloat16
        grads = torch.autograd.grad(out.float().square().sum(), [q, k, v] +
                                    ([bias] if learned_bias else []))
        rel = ((out.float() - ref).norm() / ref.norm()).item()
        assert rel < 0.01, rel
        for g, r in zip(grads, ref_grads):
            assert ((g - r).norm() / r.norm()).item() < 0.02


@pytest.mark.parametrize('amp', [False, True], ids=['fp32', 'bf16'])
def test_linear_packs_only_where_packing_pays(monkeypatch, amp):
    """``packable_linear(pack=True)`` inside a scope packs a weight first
    met with at least ``_MIN_PACK_ROWS[dtype]`` rows (fp32: 512 rows, bf16:
    1024) and reuses the copy for shorter calls after; below it, it is
    ``F.linear``; outside a scope it packs for that call alone. Either way
    the result is the linear's (autocast's under bf16)."""
    from mmvisattn.ops import linear, packable_linear, packed_weights_scope

    def packed(x, lin):
        return packable_linear(x, lin.weight, lin.bias, pack=True)
    if not linear._ONEDNN or (amp and not linear._ONEDNN_BF16):
        pytest.skip('no oneDNN linear for this dtype in this torch/CPU')
    dtype = torch.bfloat16 if amp else torch.float32
    least = linear._MIN_PACK_ROWS[dtype]
    packs = []
    reorder = linear.pack_weight
    monkeypatch.setattr(linear, 'pack_weight',
                        lambda w, rows: packs.append(w.dtype) or reorder(
                            w, rows))
    lin = torch.nn.Linear(64, 96).eval()
    tol = dict(rtol=2e-2, atol=2e-2) if amp else dict(rtol=1e-5, atol=1e-5)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16,
                                         enabled=amp):
        short, full = torch.randn(least - 1, 64), torch.randn(least, 64)
        with packed_weights_scope():
            out_short = packed(short, lin)
            assert packs == []  # too few rows to pay for a packing
            out_full = packed(full, lin)
            assert packs == [dtype]
            again = packed(short, lin)  # reuses the packed copy
            assert packs == [dtype]
        assert out_full.dtype == again.dtype == dtype
        for out, x in ((out_short, short), (out_full, full), (again, short)):
            torch.testing.assert_close(out.float(), lin(x).float(), **tol)
        assert packed(full, lin).dtype == dtype and len(packs) == 2
        assert linear._LOCAL.packed is None  # the call's copy is dropped


def test_attention_masks_reach_sdpa_with_a_unit_last_stride(monkeypatch):
    """CUDA's fused SDPA kernels take a mask only with its last dimension at
    stride 1; the relative position bias once arrived as a permuted view
    (stride `heads`), and on an H200 every unshifted window block fell back
    to the math kernel. The CPU kernel accepts any stride, so this is
    checked on what every backbone hands to SDPA."""
    import copy

    import torch.nn.functional as F

    from helpers.backbones import AUTOCAST_BACKBONES
    from mmvisattn.registry import MODELS
    seen = []
    sdpa = F.scaled_dot_product_attention

    def recording_sdpa(q, k, v, attn_mask=None, *args, **kwargs):
        if attn_mask is not None:
            seen.append((name, tuple(attn_mask.shape), attn_mask.stride()))
        return sdpa(q, k, v, attn_mask, *args, **kwargs)

    monkeypatch.setattr(F, 'scaled_dot_product_attention', recording_sdpa)
    for name, cfg in AUTOCAST_BACKBONES.items():
        model = MODELS.build(copy.deepcopy(cfg)).eval()
        with torch.no_grad():
            model(torch.randn(1, 3, 64, 64))
    assert {n for n, *_ in seen} >= {'swin-cyclic', 'rswatt'}, seen
    strided = [s for s in seen if s[2][-1] != 1]
    assert not strided, strided
