"""Window partition helpers on channels-last feature maps (B, H, W, C)."""
from typing import Tuple

import torch
import torch.nn.functional as F


def pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero-pad a (B, H, W, C) map at the bottom/right to multiples of ``multiple``."""
    H, W = x.shape[1:3]
    pad_b = (multiple - H % multiple) % multiple
    pad_r = (multiple - W % multiple) % multiple
    if pad_b or pad_r:
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    return x


def window_partition(x: torch.Tensor, window_size: int) -> torch.Tensor:
    """Split (B, H, W, C) into (B, num_windows, window_size**2, C).

    H and W must be multiples of ``window_size`` (see :func:`pad_to_multiple`).
    Windows are ordered row-major over the map, tokens row-major inside a window.
    """
    B, H, W, C = x.shape
    if H % window_size or W % window_size:
        raise ValueError(f'window_partition: feature map {H}x{W} is not a '
                         f'multiple of window_size={window_size}; pad it first')
    x = x.view(B, H // window_size, window_size, W // window_size, window_size,
               C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, -1, window_size**2, C)


def window_reverse(windows: torch.Tensor, window_size: int,
                   hw_shape: Tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`window_partition`: (B, nW, ws*ws, C) -> (B, H, W, C)."""
    H, W = hw_shape
    B, C = windows.shape[0], windows.shape[-1]
    x = windows.view(B, H // window_size, W // window_size, window_size,
                     window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
