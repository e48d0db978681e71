"""Relative position bias index and table resizing (Swin paper, sec. 3.2)."""
import math

import torch
import torch.nn.functional as F

from .windows import window_pair


def relative_position_index(window_size) -> torch.Tensor:
    """(N, N) index into a (2h-1)(2w-1)-row bias table for every token pair
    of an h x w window (``window_size``: one int, or an (h, w) pair).

    Same ordering as the official release, so released tables load as-is.
    """
    wh, ww = window_pair(window_size)
    coords = torch.stack(
        torch.meshgrid(torch.arange(wh), torch.arange(ww),
                       indexing='ij')).flatten(1)  # 2, N
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)  # N, N, 2
    # shift to start from 0
    return (rel[..., 0] + wh - 1) * (2 * ww - 1) + rel[..., 1] + ww - 1


def resize_relative_position_table(table: torch.Tensor,
                                   window_size) -> torch.Tensor:
    """Bicubically resize a ((2M-1)^2, heads) table (a square window's) to
    ``window_size`` (one int, or an (h, w) pair: (2h-1)(2w-1) rows).

    Used when a checkpoint trained with one window (e.g. 7 at 224px) is
    loaded into a model with another (e.g. 12 at 384px, or 8 x 12).
    """
    length, heads = table.shape
    old = int(round(length**0.5))
    if old * old != length:
        raise ValueError(f'relative position table of {length} rows is not '
                         'a square window\'s (2M-1)^2: it cannot be resized '
                         f'to window_size={window_size}')
    new = tuple(2 * m - 1 for m in window_pair(window_size))
    if (old, old) == new:
        return table
    grid = table.T.reshape(1, heads, old, old)
    grid = F.interpolate(grid, size=new, mode='bicubic', align_corners=False)
    return grid.reshape(heads, new[0] * new[1]).T.contiguous()


def log_spaced_relative_coords(window_size,
                               pretrained_window_size=0) -> torch.Tensor:
    """((2h-1)(2w-1), 2) log-spaced relative offsets (dy, dx) of an h x w
    window (one int, or an (h, w) pair), Swin V2's continuous position bias
    input (Liu et al., CVPR 2022, eq. 4), rows in the order
    :func:`relative_position_index` indexes.

    Offsets are normalised per axis by the pre-training window
    ``pretrained_window_size`` (by ``window_size`` when it is 0) to
    [-8, 8], then mapped to ``sign(x) * log2(1 + |x|) / log2(8)``: a window
    larger than the one pre-trained extends the same curve instead of
    resampling a table.
    """
    window = window_pair(window_size)
    trained = window_pair(pretrained_window_size or window_size)
    dy, dx = (torch.arange(1 - m, m, dtype=torch.float32) / max(p - 1, 1) * 8
              for m, p in zip(window, trained))
    coords = torch.stack(torch.meshgrid(dy, dx, indexing='ij'), -1)
    coords = torch.sign(coords) * torch.log2(coords.abs() + 1.) / math.log2(8)
    return coords.view(-1, 2)
