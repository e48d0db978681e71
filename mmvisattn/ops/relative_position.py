"""Relative position bias index and table resizing (Swin paper, sec. 3.2)."""
import math

import torch
import torch.nn.functional as F


def relative_position_index(window_size: int) -> torch.Tensor:
    """(N, N) index into a (2M-1)^2 bias table for every token pair of a window.

    Same ordering as the official release, so released tables load as-is.
    """
    coords = torch.stack(
        torch.meshgrid(
            torch.arange(window_size), torch.arange(window_size),
            indexing='ij')).flatten(1)  # 2, N
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)  # N, N, 2
    rel = rel + (window_size - 1)  # shift to start from 0
    return rel[..., 0] * (2 * window_size - 1) + rel[..., 1]


def resize_relative_position_table(table: torch.Tensor,
                                   window_size: int) -> torch.Tensor:
    """Bicubically resize a ((2M-1)^2, heads) table to ``window_size``.

    Used when a checkpoint trained with one window (e.g. 7 at 224px) is
    loaded into a model with another (e.g. 12 at 384px).
    """
    length, heads = table.shape
    old = int(round(length**0.5))
    if old * old != length:
        raise ValueError(f'relative position table of {length} rows is not '
                         'a (2M-1)^2 square')
    new = 2 * window_size - 1
    if old == new:
        return table
    grid = table.T.reshape(1, heads, old, old)
    grid = F.interpolate(grid, size=(new, new), mode='bicubic',
                         align_corners=False)
    return grid.reshape(heads, new * new).T.contiguous()


def log_spaced_relative_coords(window_size: int,
                               pretrained_window_size: int = 0
                               ) -> torch.Tensor:
    """((2M-1)^2, 2) log-spaced relative offsets (dy, dx) of a window,
    Swin V2's continuous position bias input (Liu et al., CVPR 2022,
    eq. 4), rows in the order :func:`relative_position_index` indexes.

    Offsets are normalised by the pre-training window ``pretrained_window_size``
    (by ``window_size`` when it is 0) to [-8, 8], then mapped to
    ``sign(x) * log2(1 + |x|) / log2(8)``: a window larger than the one
    pre-trained extends the same curve instead of resampling a table.
    """
    span = (pretrained_window_size or window_size) - 1
    offsets = torch.arange(1 - window_size, window_size, dtype=torch.float32)
    coords = torch.stack(torch.meshgrid(offsets, offsets, indexing='ij'), -1)
    coords = coords / max(span, 1) * 8
    coords = torch.sign(coords) * torch.log2(coords.abs() + 1.) / math.log2(8)
    return coords.view(-1, 2)
