"""Reconstructed sliding-window attention (RSWAtt): every query attends its
own M x M neighbourhood (as :mod:`mmvisattn.ops.sliding`), but through a
window whose extents it predicts itself.

A key at offset ``(oy, ox)`` (key - query, in ``-(M//2) .. M-1-M//2``) of a
query with extents ``(left, right, top, bottom)`` (pixels, >= 0) belongs to
its window with the soft, differentiable membership

    m = s((ox + left + 1/2) / t) s((right + 1/2 - ox) / t)
        s((oy + top + 1/2) / t) s((bottom + 1/2 - oy) / t)

(``s`` the sigmoid, ``t`` the temperature), added to the logits as
``log m``. Extents ``(M//2, M-1-M//2, M//2, M-1-M//2)`` with ``t -> 0`` give
exactly sliding-window attention of size M; smaller extents shrink the
window smoothly, so the extents get gradients. Keys outside the M x M
neighbourhood are never attended, nor keys beyond the image: at the border
the neighbourhood is cut, not shifted inward as NATTEN's
(:mod:`mmvisattn.ops.neighborhood`). The work runs in halo tiles like the
blocked sliding-window kernel: memory and time are linear in the number of
pixels, and no (N, N) tensor is ever formed.
"""
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from .neighborhood import (
    halo,
    halo_tiles,
    inside_image,
    tile_index,
    tiled_neighborhood_attention,
    unfold_neighborhood,
)
from .symbolic import is_concrete, recording


def window_log_membership(offsets: torch.Tensor, near: torch.Tensor,
                          far: torch.Tensor,
                          temperature: float) -> torch.Tensor:
    """log of the soft membership along one axis: ``offsets`` (key -
    query) broadcast against the extents before (``near``) and after
    (``far``) the query."""
    return (F.logsigmoid((offsets + near + 0.5) / temperature) +
            F.logsigmoid((far + 0.5 - offsets) / temperature))


def reconstructed_window_attention(q: torch.Tensor,
                                   k: torch.Tensor,
                                   v: torch.Tensor,
                                   window_size: int,
                                   extents: torch.Tensor,
                                   temperature: float = 0.5,
                                   bias: Optional[torch.Tensor] = None,
                                   scale: Optional[float] = None,
                                   tile: Optional[int] = None,
                                   max_chunk_elements: int = 1 << 22
                                   ) -> torch.Tensor:
    """Attention of every query over its predicted window.

    Args:
        q, k, v: (B, heads, H, W, d).
        window_size (int): M, the largest window (the neighbourhood).
        extents: (B, H, W, 4) left, right, top, bottom in pixels.
        temperature (float): softness of the window border (> 0).
        bias: (heads, M*M) relative position bias per neighbour offset (the
            sliding-window kernels' layout), or None.

    Returns (B, heads, H, W, d).
    """
    B, heads, H, W, d = q.shape
    if extents.shape != (B, H, W, 4):
        raise ValueError(f'extents must be (B, H, W, 4) = {(B, H, W, 4)}, '
                         f'got {tuple(extents.shape)}')
    if not temperature > 0:
        raise ValueError(f'temperature must be > 0, got {temperature}')
    M = window_size
    T = tile or M
    scale = d**-0.5 if scale is None else scale
    before, _ = halo(M)
    _, neighbour, _, (th, tw) = halo_tiles(H, W, M, T, q.device)
    num_tiles, span = th * tw, T + M - 1
    K = span * span

    # static part: keys outside the image / the neighbourhood, and the bias;
    # keys beyond the largest window get exactly zero weight (-inf: every
    # query has itself as a neighbour, so no row is all -inf)
    table = torch.zeros(heads, M * M, dtype=q.dtype, device=q.device)
    if bias is not None:
        table = table + bias.to(q.dtype)
    table = torch.cat([table, table.new_full((heads, 1), float('-inf'))], 1)
    pair = table[:, neighbour]  # (heads, T*T, K)

    # key - query offsets along each axis inside a tile: (T, span)
    pos = torch.arange(span, device=q.device, dtype=q.dtype)
    offsets = pos[None, :] - torch.arange(
        T, device=q.device, dtype=q.dtype)[:, None] - before

    # per query extents, in tiles: (B, tiles, T, T, 4)
    ext = F.pad(extents.to(q.dtype), (0, 0, 0, tw * T - W, 0, th * T - H))
    if is_concrete(H, W):
        ext = ext.view(B, th, T, tw, T, 4).permute(0, 1, 3, 2, 4, 5).reshape(
            B, num_tiles, T, T, 4)
    else:  # traced sizes: a gather (see neighborhood.tile_index)
        query_index, _ = tile_index(H, W, T, q.device)
        ext = ext.reshape(B, -1, 4).index_select(1, query_index).view(
            B, num_tiles, T, T, 4)

    def tile_mask(start, end, key_border, heads_first=False):
        # (B, tiles, heads, T*T, K), or (B, heads, tiles, T*T, K)
        left, right, top, bottom = ext[:, start:end].unbind(-1)
        # x part: (B, c, Ty, Tx, span_x) over the key column; y part over
        # the key row; their sum over (span_y, span_x) is log m per pair
        log_x = window_log_membership(offsets[None, None, None],
                                      left[..., None], right[..., None],
                                      temperature)
        log_y = window_log_membership(offsets[None, None, :, None],
                                      top[..., None], bottom[..., None],
                                      temperature)
        log_m = (log_y[..., :, None] + log_x[..., None, :]).reshape(
            B, end - start, T * T, K)
        if heads_first:
            return (key_border[None, None] + pair[None, :, None] +
                    log_m[:, None])
        return (key_border[None, :, None] + pair[None, None] +
                log_m[:, :, None])

    # (while a graph is recorded, every tile runs in one call)
    chunk = 1 if recording() else max(
        1, max_chunk_elements // max(1, B * heads * T * T * K))
    return tiled_neighborhood_attention(q, k, v, M, T, tile_mask, chunk,
                                        scale)


def reweighted_window_attention(q: torch.Tensor,
                                k: torch.Tensor,
                                v: torch.Tensor,
                                window_size: int,
                                logit_scale: torch.Tensor,
                                reweight: Optional[
                                    Callable[[torch.Tensor],
                                             torch.Tensor]] = None,
                                bias: Optional[torch.Tensor] = None
                                ) -> torch.Tensor:
    """The RSWAtt paper's own module (the layer's ``MLPReweighting``
    reconstruction): cosine attention with a learned temperature over each
    query's M x M neighbourhood, whose weights ``A`` are then reconstructed
    by a function over the M*M window positions, ``R = A + reweight(A)`` (an
    MLP in the layer), and ``out = R V``.

    Args:
        q, k, v: (B, heads, H, W, d).
        logit_scale: (heads,) multipliers of the cosine similarities.
        reweight: maps (..., M*M) weights to (..., M*M) corrections.
        bias: (heads, M*M) relative position bias, or None.

    Keys are unfolded per query (N * M * M values: linear in the pixels);
    keys outside the image get zero weight.
    """
    B, heads, H, W, d = q.shape
    M = window_size
    inside = inside_image(H, W, M, q.device)  # (H*W, M*M)
    qn = F.normalize(q, dim=-1).reshape(B, heads, H * W, 1, d)
    logits = (qn * unfold_neighborhood(F.normalize(k, dim=-1), M)).sum(-1)
    logits = logits * logit_scale.view(1, heads, 1, 1)
    if bias is not None:
        logits = logits + bias.view(1, heads, 1, M * M)
    attn = logits.masked_fill(~inside, float('-inf')).softmax(-1)
    if reweight is not None:
        attn = attn + reweight(attn).masked_fill(~inside, 0.)
    out = (attn.unsqueeze(-2) @ unfold_neighborhood(v, M)).squeeze(-2)
    return out.view(B, heads, H, W, d)
