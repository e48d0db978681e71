"""Window partitioning in its textbook form (view + permute), the
reference the tests hold the cached gather layouts and masks of
:mod:`mmvisattn.ops.windows` against."""
from typing import Tuple

import torch
import torch.nn.functional as F

from mmvisattn.ops import window_pair


def pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero-pad a (B, H, W, C) map at the bottom/right to multiples of
    ``multiple``."""
    H, W = x.shape[1:3]
    return F.pad(x, (0, 0, 0, (-W) % multiple, 0, (-H) % multiple))


def window_partition(x: torch.Tensor, window_size) -> torch.Tensor:
    """(B, H, W, C) -> (B, num_windows, h*w, C) for a window of
    ``window_size`` (one int, or an (h, w) pair); windows row-major over the
    map, tokens row-major inside a window. H and W must be multiples of the
    window."""
    B, H, W, C = x.shape
    wh, ww = window_pair(window_size)
    if H % wh or W % ww:
        raise ValueError(f'window_partition: feature map {H}x{W} is not a '
                         f'multiple of window_size={window_size}; pad it first')
    x = x.view(B, H // wh, wh, W // ww, ww, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, -1, wh * ww, C)


def window_reverse(windows: torch.Tensor, window_size,
                   hw_shape: Tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`window_partition`: (B, nW, h*w, C) -> (B, H, W, C)."""
    H, W = hw_shape
    wh, ww = window_pair(window_size)
    B, C = windows.shape[0], windows.shape[-1]
    x = windows.view(B, H // wh, W // ww, wh, ww, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
