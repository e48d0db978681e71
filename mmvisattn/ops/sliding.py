"""Sliding-window attention: every query attends its own M x M neighbourhood.

The Swin paper's Table 5 compares shifted windows with sliding windows, once
"naive" (keys unfolded per query) and once as a dedicated kernel. Both are
here with the same semantics, so they can be tested against each other:
neighbourhood offsets ``k - M // 2`` for ``k`` in ``0..M-1`` on each axis;
keys outside the image are masked; the relative position bias of a pair is
read from the same ((2M-1)^2, heads) table, by the same query - key offset,
as window attention uses.

At the image border the window stays centred and is cut by the image (a
corner query attends ceil(M/2)^2 keys); NATTEN instead shifts it inward to
keep M*M keys. Only queries within M // 2 of a border differ
(:mod:`mmvisattn.ops.neighborhood` says how).
"""
from typing import Optional

import torch

from .cache import shape_cache
from .masks import MASK_VALUE
from .neighborhood import (
    halo_tiles,
    outside_image_mask,
    tiled_neighborhood_attention,
    unfold_neighborhood,
)


@shape_cache(maxsize=16)
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

    def unfold(t):  # (B*h, H*W, M*M, d), materialised
        return unfold_neighborhood(t, M).reshape(B * heads, H * W, M * M, d)

    k_nb, v_nb = unfold(k), unfold(v)
    logits = outside_image_mask(H, W, M, q.device).to(q.dtype).expand(
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
    the map instead of M*M times, and each chunk of ``tiles_per_chunk`` tiles
    runs one :func:`~mmvisattn.ops.attention.attend` with a mask that keeps
    every query to its own neighbourhood (plus the relative bias): the fused
    ``scaled_dot_product_attention`` when the bias needs no gradient,
    spelled out when it does (training a bias table). Chunks keep masks and
    logits in cache. ``use_content=False`` is ``softmax(mask) v``, spelled
    out.
    """
    B, heads, H, W, d = q.shape
    M = window_size
    T = tile or M
    scale = d**-0.5 if scale is None else scale
    _, neighbour, _, _ = halo_tiles(H, W, M, T, q.device)

    # (heads, T*T, K) per-pair bias; non-neighbours get MASK_VALUE.
    table = torch.zeros(heads, M * M, dtype=q.dtype, device=q.device)
    if bias is not None:
        table = table + bias.to(q.dtype)
    table = torch.cat([table, table.new_full((heads, 1), MASK_VALUE)], 1)
    pair_bias = table[:, neighbour]

    def tile_mask(start, end, key_border, heads_first=False):
        # (1, tiles, heads, T*T, K), or (1, heads, tiles, T*T, K)
        if heads_first:
            return (key_border[None] + pair_bias[:, None])[None]
        return (key_border[:, None] + pair_bias[None])[None]

    return tiled_neighborhood_attention(q, k, v, M, T, tile_mask,
                                        tiles_per_chunk, scale, use_content)
