"""Sliding-window attention: every query attends its own M x M neighbourhood.

The Swin paper's Table 5 compares shifted windows with sliding windows, once
"naive" (keys unfolded per query) and once as a dedicated kernel. Both are
here with the same semantics, so they can be tested against each other:
neighbourhood offsets ``k - M // 2`` for ``k`` in ``0..M-1`` on each axis;
keys outside the image are masked; the relative position bias of a pair is
read from the same ((2M-1)^2, heads) table, by the same query - key offset,
as window attention uses.
"""
import functools
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .masks import MASK_VALUE


def _halo(window_size: int) -> Tuple[int, int]:
    """Keys needed before/after a query on each axis."""
    return window_size // 2, window_size - 1 - window_size // 2


@functools.lru_cache(maxsize=16)
def sliding_relative_index(window_size: int,
                           device: torch.device = torch.device('cpu')
                           ) -> torch.Tensor:
    """(M*M,) index of each neighbour offset into a (2M-1)^2 bias table.

    Rows are looked up by query - key, as in window attention
    (:func:`relative_position_index`), so one table serves both.
    """
    M = window_size
    offset = M // 2 - torch.arange(M) + (M - 1)  # query - key, from 0
    return (offset[:, None] * (2 * M - 1) + offset[None, :]).reshape(-1).to(
        device)


@functools.lru_cache(maxsize=32)
def _border_mask(height: int, width: int, window_size: int,
                 device: torch.device) -> torch.Tensor:
    """(H*W, M*M) additive mask: neighbours that fall outside the image."""
    before, after = _halo(window_size)
    valid = F.pad(torch.ones(1, 1, height, width),
                  (before, after, before, after))
    valid = F.unfold(valid, window_size)[0].T  # (H*W, M*M)
    return torch.zeros_like(valid).masked_fill_(valid == 0,
                                                MASK_VALUE).to(device)


def sliding_window_attention_naive(q: torch.Tensor,
                                   k: torch.Tensor,
                                   v: torch.Tensor,
                                   window_size: int,
                                   bias: Optional[torch.Tensor] = None,
                                   scale: Optional[float] = None,
                                   use_content: bool = True) -> torch.Tensor:
    """Unfold keys and values per query (M*M copies of them: the naive way).

    Args:
        q, k, v: (B, heads, H, W, d).
        bias: (heads, M*M) bias of each neighbour offset, or None.
        use_content: False drops the q.k term (position-only attention).

    Returns (B, heads, H, W, d).
    """
    B, heads, H, W, d = q.shape
    M = window_size
    scale = d**-0.5 if scale is None else scale
    before, after = _halo(M)

    def unfold(t):  # (B, h, H, W, d) -> (B*h, H*W, M*M, d), materialised
        t = F.pad(t.reshape(B * heads, H, W, d).permute(0, 3, 1, 2),
                  (before, after, before, after))
        t = F.unfold(t, M)  # (B*h, d*M*M, H*W)
        return t.view(B * heads, d, M * M, H * W).permute(0, 3, 2, 1)

    k_nb, v_nb = unfold(k), unfold(v)
    logits = _border_mask(H, W, M, q.device).to(q.dtype).expand(
        B * heads, H * W, M * M)
    if use_content:
        q = q.reshape(B * heads, H * W, 1, d) * scale
        logits = logits + (q @ k_nb.transpose(-1, -2)).squeeze(2)
    if bias is not None:
        logits = (logits.view(B, heads, H * W, M * M)
                  + bias.to(q.dtype)[None, :, None, :]).view(
                      B * heads, H * W, M * M)
    attn = logits.softmax(-1)
    out = (attn.unsqueeze(2) @ v_nb).squeeze(2)  # (B*h, H*W, d)
    return out.view(B, heads, H, W, d)


@functools.lru_cache(maxsize=32)
def _halo_tiles(height: int, width: int, window_size: int, tile: int,
                device: torch.device):
    """Index and masks of halo tiles (cached per map size).

    Queries are cut into ``tile`` x ``tile`` tiles; each tile reads one
    (tile+M-1)^2 block of keys around it (its halo), shared by all its
    queries, instead of M*M keys per query.

    Returns:
        key_index: (num_tiles * K,) frame positions of each tile's keys,
            K = (tile+M-1)^2, frame = the map padded by the halo.
        neighbour: (tile*tile, K) neighbour offset index 0..M*M-1 of each
            (query, key) pair in a tile, M*M where the key is not a
            neighbour of the query.
        key_border: (num_tiles, 1, K) additive mask of keys outside the image.
        tiles_hw: tiles along H and W.
    """
    M, T = window_size, tile
    before, after = _halo(M)
    tiles_h, tiles_w = -(-height // T), -(-width // T)
    frame_h = tiles_h * T + M - 1
    frame_w = tiles_w * T + M - 1
    span = T + M - 1
    ty = torch.arange(tiles_h)[:, None, None, None] * T
    tx = torch.arange(tiles_w)[None, :, None, None] * T
    ky = torch.arange(span)[None, None, :, None]
    kx = torch.arange(span)[None, None, None, :]
    key_index = ((ty + ky) * frame_w + tx + kx).reshape(-1)

    qy, qx = torch.meshgrid(torch.arange(T), torch.arange(T), indexing='ij')
    ky, kx = torch.meshgrid(torch.arange(span), torch.arange(span),
                            indexing='ij')
    dy = ky.reshape(1, -1) - qy.reshape(-1, 1)  # in [0, M) for neighbours
    dx = kx.reshape(1, -1) - qx.reshape(-1, 1)
    is_nb = (dy >= 0) & (dy < M) & (dx >= 0) & (dx < M)
    neighbour = torch.where(is_nb, dy * M + dx, torch.full_like(dy, M * M))

    valid = torch.zeros(frame_h, frame_w)
    valid[before:before + height, before:before + width] = 1
    key_valid = valid.reshape(-1)[key_index].view(tiles_h * tiles_w, 1, -1)
    key_border = torch.zeros_like(key_valid).masked_fill_(
        key_valid == 0, MASK_VALUE)
    return (key_index.to(device), neighbour.to(device),
            key_border.to(device), (tiles_h, tiles_w))


def tile_queries_and_keys(q: torch.Tensor, k: torch.Tensor,
                          v: torch.Tensor, window_size: int, tile: int,
                          key_index: torch.Tensor):
    """Queries cut into ``tile`` x ``tile`` tiles, keys and values gathered
    once per tile halo (``key_index`` from :func:`_halo_tiles`).

    (B, h, H, W, d) each -> q (B, h, tiles, T*T, d), k and v
    (B, h, tiles, (T+M-1)^2, d)."""
    B, heads, H, W, d = q.shape
    M, T = window_size, tile
    before, _ = _halo(M)
    th, tw = -(-H // T), -(-W // T)
    fh, fw = th * T + M - 1, tw * T + M - 1
    span2 = (T + M - 1)**2

    def frame(t):  # (B, h, H, W, d) -> (B, h, frame_h*frame_w, d)
        t = F.pad(t, (0, 0, before, fw - W - before, before,
                      fh - H - before))
        return t.reshape(B, heads, fh * fw, d)

    k_tiles = frame(k).index_select(2, key_index).view(
        B, heads, th * tw, span2, d)
    v_tiles = frame(v).index_select(2, key_index).view(
        B, heads, th * tw, span2, d)
    q_tiles = F.pad(q, (0, 0, 0, tw * T - W, 0, th * T - H)).view(
        B, heads, th, T, tw, T, d).permute(0, 1, 2, 4, 3, 5, 6).reshape(
            B, heads, th * tw, T * T, d)
    return q_tiles, k_tiles, v_tiles


def untile(out: torch.Tensor, tiles_hw: Tuple[int, int],
           size: Tuple[int, int]) -> torch.Tensor:
    """(B, tiles, h, T*T, d) per-tile outputs -> (B, h, H, W, d)."""
    B, _, heads, TT, d = out.shape
    (th, tw), (H, W) = tiles_hw, size
    T = int(round(TT**0.5))
    out = out.view(B, th, tw, heads, T, T, d).permute(0, 3, 1, 4, 2, 5, 6)
    return out.reshape(B, heads, th * T, tw * T, d)[:, :, :H, :W]


def sliding_window_attention_blocked(q: torch.Tensor,
                                     k: torch.Tensor,
                                     v: torch.Tensor,
                                     window_size: int,
                                     bias: Optional[torch.Tensor] = None,
                                     scale: Optional[float] = None,
                                     use_content: bool = True,
                                     tile: Optional[int] = None,
                                     tiles_per_chunk: int = 64
                                     ) -> torch.Tensor:
    """Same result as :func:`sliding_window_attention_naive`, in halo tiles.

    Keys and values are gathered once per tile halo, (1 + (M-1)/tile)^2 times
    the map instead of M*M times, and each tile runs one fused
    ``scaled_dot_product_attention`` with a mask that keeps every query to its
    own neighbourhood (plus the relative bias). Tiles are processed in chunks
    so masks and logits stay in cache.
    """
    B, heads, H, W, d = q.shape
    M = window_size
    T = tile or M
    scale = d**-0.5 if scale is None else scale
    key_index, neighbour, key_border, (th, tw) = _halo_tiles(
        H, W, M, T, q.device)
    num_tiles, K = th * tw, (T + M - 1)**2

    # (heads, T*T, K) per-pair bias; non-neighbours get MASK_VALUE.
    table = torch.zeros(heads, M * M, dtype=q.dtype, device=q.device)
    if bias is not None:
        table = table + bias.to(q.dtype)
    table = torch.cat([table, table.new_full((heads, 1), MASK_VALUE)], 1)
    pair_bias = table[:, neighbour]

    q_tiles, k_tiles, v_tiles = tile_queries_and_keys(q, k, v, M, T,
                                                      key_index)

    outs = []
    for s in range(0, num_tiles, tiles_per_chunk):
        e = min(num_tiles, s + tiles_per_chunk)
        c = e - s
        # tiles folded into heads so one mask broadcasts over the batch
        mask = (key_border[s:e, None] + pair_bias[None]).reshape(
            1, c * heads, T * T, K)

        def fold(t):
            return t[:, :, s:e].transpose(1, 2).reshape(B, c * heads,
                                                        t.shape[-2], d)

        if use_content:
            out = F.scaled_dot_product_attention(
                fold(q_tiles), fold(k_tiles), fold(v_tiles), attn_mask=mask,
                scale=scale)
        else:
            out = mask.softmax(-1) @ fold(v_tiles)
        outs.append(out.view(B, c, heads, T * T, d))
    return untile(torch.cat(outs, 1), (th, tw), (H, W))
