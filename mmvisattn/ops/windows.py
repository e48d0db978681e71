"""Window partition helpers on channels-last feature maps (B, H, W, C)."""
from typing import NamedTuple, Tuple

import torch
import torch.nn.functional as F

from .cache import shape_cache


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


class WindowLayout(NamedTuple):
    """Where every window slot reads from, for one map size and shift.

    The map (B, H, W, C) is first zero-padded by ``pad`` = (top, bottom,
    left, right) into a frame; ``gather_index`` lists, window after window
    (row-major; tokens row-major inside a window), the frame position each
    slot reads, so one ``index_select`` does roll + partition. For every
    original token, ``scatter_index`` is its slot: one more ``index_select``
    does reverse + roll back + crop.
    """
    pad: Tuple[int, int, int, int]
    num_windows: int
    gather_index: torch.Tensor  # (num_windows * N,) into the frame
    scatter_index: torch.Tensor  # (H * W,) into the slots
    slot_to_image: torch.Tensor  # (num_windows * N,) image token, H*W if pad
    frame_valid: torch.Tensor  # (num_windows, N) bool: slot holds an image token


SHIFT_MODES = ('cyclic', 'padding', 'none')


@shape_cache(maxsize=128)
def window_layout(height: int,
                  width: int,
                  window_size: int,
                  shift_size: int = 0,
                  shift_mode: str = 'cyclic',
                  device: torch.device = torch.device('cpu')
                  ) -> WindowLayout:
    """Window layout of a ``height`` x ``width`` map (cached per size).

    shift_mode:
        ``'cyclic'``: pad bottom/right to window multiples, roll by
            ``-shift_size`` (Swin's efficient batch computation, fig. 4).
        ``'padding'``: the same shifted windows without the roll: the top/left
            is padded by ``window_size - shift_size``, the bottom/right to full
            windows
            (the "padding" baseline of Table 5: more windows, padded tokens
            to be masked).
        ``'none'``: ``shift_size`` must be 0.
    """
    if shift_mode not in SHIFT_MODES:
        raise ValueError(f'shift_mode={shift_mode!r}; choose from '
                         f'{SHIFT_MODES}')
    if not 0 <= shift_size < window_size:
        raise ValueError(f'shift_size={shift_size} must be in '
                         f'[0, window_size={window_size})')
    ws = window_size
    # A cyclic shift by -s puts window borders at s + k*ws; the padded
    # partition must cut at the same places, so it pads ws - s in front.
    top = left = (ws - shift_size) % ws if shift_mode == 'padding' else 0
    frame_h = -(-(height + top) // ws) * ws
    frame_w = -(-(width + left) // ws) * ws
    pad = (top, frame_h - height - top, left, frame_w - width - left)
    rows, cols = torch.arange(frame_h), torch.arange(frame_w)
    if shift_mode == 'cyclic' and shift_size:
        # torch.roll(x, -s)[i] == x[(i + s) % n]
        rows, cols = (rows + shift_size) % frame_h, (cols + shift_size) % frame_w
    frame_pos = (rows[:, None] * frame_w + cols[None, :]).view(
        1, frame_h, frame_w, 1)
    gather_index = window_partition(frame_pos, ws).reshape(-1)
    slot_of_frame_pos = torch.empty_like(gather_index)
    slot_of_frame_pos[gather_index] = torch.arange(gather_index.numel())
    image_pos = ((torch.arange(height)[:, None] + top) * frame_w
                 + torch.arange(width)[None, :] + left).reshape(-1)
    frame_valid = torch.zeros(frame_h * frame_w, dtype=torch.bool)
    frame_valid[image_pos] = True
    image_of_frame_pos = torch.full_like(gather_index, height * width)
    image_of_frame_pos[image_pos] = torch.arange(height * width)
    return WindowLayout(
        pad=pad,
        num_windows=(frame_h // ws) * (frame_w // ws),
        gather_index=gather_index.to(device),
        scatter_index=slot_of_frame_pos[image_pos].to(device),
        slot_to_image=image_of_frame_pos[gather_index].to(device),
        frame_valid=frame_valid[gather_index].view(-1, ws * ws).to(device))
