"""Attention masks for shifted windows."""

import torch

from .cache import shape_cache
from .windows import window_partition

# Additive mask value: it multiplies a masked key's softmax weight by
# exp(-100) = 3.8e-44 (a denormal in fp32, not exactly 0; 0 in fp16/bf16),
# and stays finite in fp16/bf16, so a masked softmax never produces
# inf - inf = NaN under AMP.
MASK_VALUE = -100.0


@shape_cache(maxsize=64)
def shifted_window_mask(height: int, width: int, window_size: int,
                        shift_size: int,
                        device: torch.device = torch.device('cpu')
                        ) -> torch.Tensor:
    """Batched mask for SW-MSA after a cyclic shift by ``-shift_size``.

    The cyclic shift moves the top/left strips of the (padded) map to the
    bottom/right; inside a window, tokens that come from different strips were
    not neighbours before the shift and must not attend to each other.

    Returns a (num_windows, N, N) float tensor, N = window_size**2, holding 0
    for allowed pairs and :data:`MASK_VALUE` for blocked ones. Cached per
    feature size and device: every block of a stage reuses one tensor.
    """
    if height % window_size or width % window_size:
        raise ValueError(f'shifted_window_mask: {height}x{width} is not a '
                         f'multiple of window_size={window_size}')
    if not 0 < shift_size < window_size:
        raise ValueError(f'shift_size must be in (0, {window_size}), '
                         f'got {shift_size}')
    region = torch.zeros(1, height, width, 1, device=device)
    bounds = (slice(0, -window_size), slice(-window_size, -shift_size),
              slice(-shift_size, None))
    label = 0
    for h in bounds:
        for w in bounds:
            region[:, h, w, :] = label
            label += 1
    region_windows = window_partition(region, window_size)[0, ..., 0]
    diff = region_windows.unsqueeze(1) - region_windows.unsqueeze(2)
    return torch.zeros_like(diff).masked_fill_(diff != 0, MASK_VALUE)


def padding_key_mask(frame_valid: torch.Tensor) -> torch.Tensor:
    """(num_windows, 1, N) additive mask hiding padded keys of each window.

    For the "padding" shift baseline: windows cut at the map border are
    filled up with zeros that no query may attend to.
    """
    mask = torch.zeros(frame_valid.shape, dtype=torch.float32,
                       device=frame_valid.device)
    return mask.masked_fill_(~frame_valid, MASK_VALUE).unsqueeze(1)
