"""Neighbourhood primitives: each query attends its own ``kernel_size``
squared neighbourhood (offsets ``k - kernel_size // 2`` for ``k`` in
``0..kernel_size-1`` on each axis).

Where this differs from NATTEN's ``na2d``: at the image border. NATTEN
shifts a border query's window inward, so that every query attends exactly
``kernel_size**2`` keys (its window starts at
``clamp(i - kernel_size // 2, 0, L - kernel_size)`` on each axis, which
needs every axis at least ``kernel_size`` long). Here the window stays
centred on its query and the keys beyond the image are masked
(:data:`~mmvisattn.ops.masks.MASK_VALUE`, -inf in the re-weighted kernel:
they get no weight), so a query within ``kernel_size // 2`` of a border
attends fewer keys: a corner query ``ceil(kernel_size / 2)**2`` (16 of 49
at 7), a query on an edge ``ceil(kernel_size / 2) * kernel_size``; maps
smaller than the kernel work.
Away from the border (``kernel_size // 2`` or more from every edge) both
are the same neighbourhood. This holds for every kernel built from these
(sliding window, naive and blocked; RSWAtt's reconstructed and re-weighted
windows); checkpoints were trained with it, so it stays.
``tests/test_ops.py::test_neighbourhood_border_is_masked_not_shifted_as_in_natten``
compares both on a small map against NATTEN's window written out in torch
(NATTEN itself is not needed). Even kernel sizes take one more key before
the query than after it (offsets ``-(k // 2) .. k - 1 - k // 2``); they
were not compared with NATTEN's even-kernel placement.

Every neighbourhood kernel (:mod:`~mmvisattn.ops.sliding`,
:mod:`~mmvisattn.ops.reconstructed`) is built from these, on tensors laid
out (B, heads, H, W, d):

* :func:`halo`, :func:`unfold_neighborhood`, :func:`inside_image` -- the
  naive form: every query's keys copied out (``kernel_size**2`` copies);
* :func:`halo_tiles`, :func:`tile_queries_and_keys`, :func:`untile`,
  :func:`tiled_neighborhood_attention` -- the blocked form: queries in
  ``tile`` x ``tile`` tiles that share one gathered block of keys (their
  halo), attention run chunk by chunk over tiles with a caller-supplied
  additive mask, so memory and time stay linear in the pixels.
"""
import math
from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F

from .attention import attend
from .cache import shape_cache
from .masks import MASK_VALUE
from .symbolic import ceil_div, is_concrete, recording, size_tensor


def halo(kernel_size: int) -> Tuple[int, int]:
    """Keys needed before / after a query on each axis."""
    return kernel_size // 2, kernel_size - 1 - kernel_size // 2


def unfold_neighborhood(t: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """(B, heads, H, W, d) -> (B, heads, H*W, kernel_size**2, d): each
    query's neighbourhood materialised, zeros outside the image."""
    B, heads, H, W, d = t.shape
    before, after = halo(kernel_size)
    t = F.pad(t.reshape(B * heads, H, W, d).permute(0, 3, 1, 2),
              (before, after, before, after))
    t = F.unfold(t, kernel_size).view(B, heads, d, kernel_size**2, H * W)
    return t.permute(0, 1, 4, 3, 2)


@shape_cache(maxsize=32)
def inside_image(height: int, width: int, kernel_size: int,
                 device: torch.device) -> torch.Tensor:
    """(H*W, kernel_size**2) bool: which neighbours lie inside the image
    (by arithmetic on ``arange``: exact for traced sizes too)."""
    before, _ = halo(kernel_size)
    offsets = torch.arange(kernel_size, device=device) - before

    def along(n):  # (n, kernel_size): the neighbour lies in [0, n)
        pos = torch.arange(n, device=device)[:, None] + offsets[None, :]
        if not is_concrete(n):
            n = size_tensor(n, device)
        return (pos >= 0) & (pos < n)

    inside = along(height)[:, None, :, None] & along(width)[None, :, None, :]
    return inside.reshape(-1, kernel_size * kernel_size)


@shape_cache(maxsize=32)
def outside_image_mask(height: int, width: int, kernel_size: int,
                       device: torch.device) -> torch.Tensor:
    """(H*W, kernel_size**2) additive mask: MASK_VALUE for neighbours
    outside the image, 0 inside."""
    inside = inside_image(height, width, kernel_size, device)
    return torch.where(inside, 0., MASK_VALUE).float()


@shape_cache(maxsize=32)
def halo_tiles(height: int, width: int, kernel_size: int, tile: int,
               device: torch.device):
    """Index and masks of halo tiles (cached per map size).

    Queries are cut into ``tile`` x ``tile`` tiles; each tile reads one
    (tile+M-1)^2 block of keys around it (its halo), shared by all its
    queries, instead of M*M keys per query (M = ``kernel_size``).

    Returns:
        key_index: (num_tiles * K,) frame positions of each tile's keys,
            K = (tile+M-1)^2, frame = the map padded by the halo.
        neighbour: (tile*tile, K) neighbour offset index 0..M*M-1 of each
            (query, key) pair in a tile, M*M where the key is not a
            neighbour of the query.
        key_border: (num_tiles, 1, K) additive mask of keys outside the image.
        tiles_hw: tiles along H and W.
    """
    M, T = kernel_size, tile
    before, _ = halo(M)
    # ceil_div, not -(-h // T): see mmvisattn.ops.symbolic, rule 2
    tiles_h, tiles_w = ceil_div(height, T), ceil_div(width, T)
    frame_w = tiles_w * T + M - 1
    span = T + M - 1
    concrete = is_concrete(height, width)
    # traced sizes as tensor operands
    fw, h, w = (frame_w, height, width) if concrete else (
        size_tensor(v) for v in (frame_w, height, width))
    ty = torch.arange(tiles_h)[:, None, None, None] * T
    tx = torch.arange(tiles_w)[None, :, None, None] * T
    ky = torch.arange(span)[None, None, :, None]
    kx = torch.arange(span)[None, None, None, :]
    key_index = ((ty + ky) * fw + tx + kx).reshape(-1)
    # keys inside the image: frame rows/columns before .. before + size
    # (comparisons, not a slice write: exact for traced sizes too)
    key_y, key_x = ty + ky - before, tx + kx - before
    key_valid = ((key_y >= 0) & (key_y < h) & (key_x >= 0) &
                 (key_x < w)).reshape(tiles_h * tiles_w, 1, -1)
    key_border = torch.where(key_valid, 0., MASK_VALUE).float()

    qy, qx = torch.meshgrid(torch.arange(T), torch.arange(T), indexing='ij')
    ky, kx = torch.meshgrid(torch.arange(span), torch.arange(span),
                            indexing='ij')
    dy = ky.reshape(1, -1) - qy.reshape(-1, 1)  # in [0, M) for neighbours
    dx = kx.reshape(1, -1) - qx.reshape(-1, 1)
    is_nb = (dy >= 0) & (dy < M) & (dx >= 0) & (dx < M)
    neighbour = torch.where(is_nb, dy * M + dx, torch.full_like(dy, M * M))

    return (key_index.to(device), neighbour.to(device),
            key_border.to(device), (tiles_h, tiles_w))


@shape_cache(maxsize=32)
def tile_index(height: int, width: int, tile: int, device: torch.device):
    """Gather indices between a map and its ``tile`` x ``tile`` tiles, for
    the recorded path (traced sizes) of :func:`tile_queries_and_keys` and
    :func:`tiled_neighborhood_attention`: with symbolic sizes,
    torch.export specialises a permute-and-reshape to the tile count it
    saw when that count is 1 (the graph then fails at any other size), and
    a gather by an index built from ``arange`` does not.

    Returns:
        query_index: (tiles * tile**2,) position of each tile slot (tiles
            row-major, pixels row-major inside a tile) in the map
            zero-padded to whole tiles, flattened.
        pixel_index: (height * width,) the tile slot of each pixel.
    """
    T = tile
    tiles_h, tiles_w = ceil_div(height, T), ceil_div(width, T)
    tw = tiles_w if is_concrete(width) else size_tensor(tiles_w)
    ty = torch.arange(tiles_h)[:, None, None, None] * T
    tx = torch.arange(tiles_w)[None, :, None, None] * T
    qy = torch.arange(T)[None, None, :, None]
    qx = torch.arange(T)[None, None, None, :]
    query_index = ((ty + qy) * (tw * T) + tx + qx).reshape(-1)
    i, j = torch.arange(height), torch.arange(width)
    rows = (i // T) * (tw * T * T) + (i % T) * T
    cols = (j // T) * (T * T) + j % T
    pixel_index = (rows[:, None] + cols[None, :]).reshape(-1)
    return query_index.to(device), pixel_index.to(device)


def tile_queries_and_keys(q: torch.Tensor, k: torch.Tensor,
                          v: torch.Tensor, kernel_size: int, tile: int,
                          key_index: torch.Tensor):
    """Queries cut into ``tile`` x ``tile`` tiles, keys and values gathered
    once per tile halo (``key_index`` from :func:`halo_tiles`).

    (B, h, H, W, d) each -> q (B, h, tiles, T*T, d), k and v
    (B, h, tiles, (T+M-1)^2, d)."""
    B, heads, H, W, d = q.shape
    M, T = kernel_size, tile
    before, _ = halo(M)
    th, tw = ceil_div(H, T), ceil_div(W, T)
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
    q_pad = F.pad(q, (0, 0, 0, tw * T - W, 0, th * T - H))
    if is_concrete(H, W):
        q_tiles = q_pad.view(B, heads, th, T, tw, T, d).permute(
            0, 1, 2, 4, 3, 5, 6).reshape(B, heads, th * tw, T * T, d)
    else:  # traced sizes: a gather (see tile_index)
        query_index, _ = tile_index(H, W, T, q.device)
        q_tiles = q_pad.reshape(B, heads, -1, d).index_select(
            2, query_index).view(B, heads, th * tw, T * T, d)
    return q_tiles, k_tiles, v_tiles


def untile(out: torch.Tensor, tiles_hw: Tuple[int, int],
           size: Tuple[int, int]) -> torch.Tensor:
    """(B, tiles, h, T*T, d) per-tile outputs -> (B, h, H, W, d)."""
    B, _, heads, TT, d = out.shape
    (th, tw), (H, W) = tiles_hw, size
    # int(): under fvcore's jit trace the shape entries are tensors
    T = math.isqrt(int(TT))
    out = out.view(B, th, tw, heads, T, T, d).permute(0, 3, 1, 4, 2, 5, 6)
    return out.reshape(B, heads, th * T, tw * T, d)[:, :, :H, :W]


def _untile_heads_first(out: torch.Tensor, tiles_hw: Tuple[int, int],
                        size: Tuple[int, int]) -> torch.Tensor:
    """(B, h, tiles, T*T, d) per-tile outputs -> (B, h, H, W, d): the
    recorded path's :func:`untile` (a gather by :func:`tile_index` when the
    sizes are traced)."""
    B, heads, _, TT, d = out.shape
    (th, tw), (H, W) = tiles_hw, size
    T = math.isqrt(int(TT))
    if is_concrete(H, W):
        out = out.reshape(B, heads, th, tw, T, T, d).permute(
            0, 1, 2, 4, 3, 5, 6)
        return out.reshape(B, heads, th * T, tw * T, d)[:, :, :H, :W]
    _, pixel_index = tile_index(H, W, T, out.device)
    return out.reshape(B, heads, -1, d).index_select(2, pixel_index).view(
        B, heads, H, W, d)


def tiled_neighborhood_attention(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel_size: int,
        tile: int, tile_mask: Callable[[int, int, torch.Tensor], torch.Tensor],
        tiles_per_chunk: int, scale: Optional[float] = None,
        use_content: bool = True) -> torch.Tensor:
    """Attention of each query over its neighbourhood, in halo tiles.

    Args:
        q, k, v: (B, heads, H, W, d).
        tile_mask: ``tile_mask(start, end, key_border, heads_first=False)``
            -> the additive mask of tiles ``start:end``, (B or 1, end -
            start, heads, T*T, K) (heads before tiles with
            ``heads_first=True``, asked for on the recorded path), given
            their (end - start, 1, K) ``key_border``; it must keep every
            query inside its own neighbourhood (MASK_VALUE or -inf
            elsewhere) and may add a bias or a learned log-membership (whose
            gradient then flows).
        tiles_per_chunk: tiles per :func:`~mmvisattn.ops.attention.attend`
            call (masks and logits of one chunk stay in cache; all tiles in
            one call while a graph is recorded); ``attend`` runs the fused
            SDPA unless the mask needs a gradient (a learned bias or
            log-membership in training), then spells it out.
        use_content: False drops the q.k term (softmax of the mask alone).

    Returns (B, heads, H, W, d).
    """
    B, heads, H, W, d = q.shape
    key_index, _, key_border, (th, tw) = halo_tiles(H, W, kernel_size, tile,
                                                    q.device)
    num_tiles, K = th * tw, (tile + kernel_size - 1)**2
    q_tiles, k_tiles, v_tiles = tile_queries_and_keys(q, k, v, kernel_size,
                                                      tile, key_index)
    if recording():
        # All tiles in one call (a loop over a traced tile count would be
        # baked into the graph, mmvisattn.ops.symbolic rule 1). Tiles take
        # the heads' place and batch x heads the batch's: folding tiles
        # into the heads (a transpose and a reshape of the traced tile
        # count) is specialised by torch.export to the count it saw when
        # that count is 1, and the ONNX attention op takes 4-D tensors.
        TT = tile * tile
        mask = tile_mask(0, num_tiles, key_border, heads_first=True)
        mask = mask.expand(B, -1, -1, -1, -1).reshape(B * heads, num_tiles,
                                                      TT, K)

        def fold(t):  # (B, h, tiles, L, d) -> (B*h, tiles, L, d)
            return t.reshape(B * heads, num_tiles, t.shape[-2], d)

        if use_content:
            out = attend(fold(q_tiles), fold(k_tiles), fold(v_tiles), mask,
                         0., scale)
        else:
            out = mask.softmax(-1) @ fold(v_tiles)
        return _untile_heads_first(out.view(B, heads, num_tiles, TT, d),
                                   (th, tw), (H, W))
    outs = []
    for s in range(0, num_tiles, tiles_per_chunk):
        e = min(num_tiles, s + tiles_per_chunk)
        c = e - s
        # tiles folded into heads so one mask serves them all at once
        mask = tile_mask(s, e, key_border[s:e])
        mask = mask.reshape(mask.shape[0], c * heads, tile * tile, K)

        def fold(t):
            return t[:, :, s:e].transpose(1, 2).reshape(B, c * heads,
                                                        t.shape[-2], d)

        if use_content:
            out = attend(fold(q_tiles), fold(k_tiles), fold(v_tiles), mask,
                         0., scale)
        else:
            out = mask.softmax(-1) @ fold(v_tiles)
        outs.append(out.view(B, c, heads, tile * tile, d))
    return untile(torch.cat(outs, 1), (th, tw), (H, W))
