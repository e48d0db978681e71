"""Attention masks for shifted windows."""

import torch

from .cache import shape_cache
from .symbolic import is_concrete, size_tensor
from .windows import window_pair

# Additive mask value: it multiplies a masked key's softmax weight by
# exp(-100) = 3.8e-44 (a denormal in fp32, not exactly 0; 0 in fp16/bf16),
# and stays finite in fp16/bf16, so a masked softmax never produces
# inf - inf = NaN under AMP.
MASK_VALUE = -100.0


@shape_cache(maxsize=64)
def shifted_window_mask(height: int, width: int, window_size, shift_size,
                        device: torch.device = torch.device('cpu')
                        ) -> torch.Tensor:
    """Batched mask for SW-MSA after a cyclic shift by ``-shift_size``
    (window and shift: one int each, or (h, w) pairs).

    The cyclic shift moves the top/left strips of the (padded) map to the
    bottom/right; inside a window, tokens that come from different strips were
    not neighbours before the shift and must not attend to each other.

    Returns a (num_windows, N, N) float tensor, N = h*w tokens of a window,
    holding 0 for allowed pairs and :data:`MASK_VALUE` for blocked ones.
    Cached per feature size and device: every block of a stage reuses one
    tensor.
    """
    wh, ww = window_pair(window_size)
    sh, sw = window_pair(shift_size)
    if is_concrete(height, width) and (height % wh or width % ww):
        raise ValueError(f'shifted_window_mask: {height}x{width} is not a '
                         f'multiple of window_size={window_size}')
    dynamic_shift = isinstance(shift_size, torch.Tensor)
    if not dynamic_shift and not (0 <= sh < wh and 0 <= sw < ww
                                  and (sh or sw)):
        raise ValueError(f'shift_size must be in (0, {window_size}), '
                         f'got {shift_size}')
    # Strip of each row (column): 0 above height - window, 1 up to
    # height - shift, 2 below; by comparisons on arange, so the mask
    # holds at every size when the sizes are traced (no slice writes). A
    # shift of 0 (a tensor shift may be 0) leaves every window inside one
    # strip: no pair is blocked.
    concrete = is_concrete(height, width)

    def strips(n, window, shift):  # (n,): the strip of each row (column)
        i = torch.arange(n, device=device)
        if not concrete:  # a traced size as a tensor operand
            n = size_tensor(n, device)
        return ((i >= n - window).long() + (i >= n - shift).long())

    # windows along each axis, as the window layout counts them (the same
    # expressions, so torch.export sees the same window count in the mask
    # as in the windows it is added to)
    rows, cols = height // wh, width // ww

    # region of every window slot (window row, window col, token row,
    # token col) by broadcasting, not by permuting a map and reshaping it:
    # with symbolic sizes, torch.export specialises such a reshape to the
    # window count it saw (a map of one window stays one window)
    region = (strips(height, wh, sh).view(rows, 1, wh, 1) * 3 +
              strips(width, ww, sw).view(1, cols, 1, ww)).view(
                  rows * cols, wh * ww)
    diff = region.unsqueeze(1) - region.unsqueeze(2)
    return torch.where(diff != 0, MASK_VALUE, 0.).float()


def padding_key_mask(frame_valid: torch.Tensor) -> torch.Tensor:
    """(num_windows, 1, N) additive mask hiding padded keys of each window.

    For the "padding" shift baseline: windows cut at the map border are
    filled up with zeros that no query may attend to.
    """
    return torch.where(frame_valid, 0., MASK_VALUE).float().unsqueeze(1)
