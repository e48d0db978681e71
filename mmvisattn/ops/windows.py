"""Window partition helpers on channels-last feature maps (B, H, W, C)."""
from typing import NamedTuple, Tuple

import torch

from .cache import shape_cache
from .symbolic import ceil_div, is_concrete, size_tensor


def window_pair(size) -> Tuple:
    """(rows, cols) of a window or a shift given as one int (square) or as
    an (h, w) pair; a 0-dim tensor shift (traced) serves both axes."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f'a window or shift is one int or an (h, w) '
                             f'pair, got {size!r}')
        return tuple(size)
    return size, size


def check_window(value, owner: str, name: str = 'window_size',
                 pairs: bool = True, minimum: int = 1):
    """The one check of a window: an int of at least ``minimum``, or where
    ``pairs`` an (h, w) pair of them (a list is read as a tuple). Returns
    it (a pair as a tuple); a ``ValueError`` naming ``owner``, ``name`` and
    the value otherwise."""
    if isinstance(value, list):
        value = tuple(value)

    def side(m):
        return isinstance(m, int) and not isinstance(m, bool) and m >= minimum

    if isinstance(value, tuple):
        ok = pairs and len(value) == 2 and all(map(side, value))
    else:
        ok = side(value)
    if ok:
        return value
    wanted = 'a positive int' if minimum == 1 else f'an int >= {minimum}'
    if pairs:
        wanted += ' or an (h, w) pair of them'
    elif isinstance(value, tuple) and len(value) == 2:
        wanted += ' (the window is square here)'
    raise ValueError(f'{owner}: {name}={value!r} must be {wanted}')


def check_shift(shift_size, window_size, owner: str):
    """A window shift: an int >= 0, or an (h, w) pair of them, below
    ``window_size`` on each side (:func:`check_window`'s errors). Returns
    it (a pair as a tuple)."""
    shift_size = check_window(shift_size, owner, 'shift_size', minimum=0)
    if not all(s < m for s, m in zip(window_pair(shift_size),
                                      window_pair(window_size))):
        raise ValueError(f'{owner}: shift_size={shift_size} must be in '
                         f'[0, window_size={window_size})')
    return shift_size


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
                  window_size,
                  shift_size=0,
                  shift_mode: str = 'cyclic',
                  device: torch.device = torch.device('cpu')
                  ) -> WindowLayout:
    """Window layout of a ``height`` x ``width`` map (cached per size).
    ``window_size`` and ``shift_size`` are one int each (square) or (h, w)
    pairs.

    shift_mode:
        ``'cyclic'``: pad bottom/right to window multiples, roll by
            ``-shift_size`` (Swin's efficient batch computation, fig. 4).
        ``'padding'``: the same shifted windows without the roll: the top/left
            is padded by ``window_size - shift_size``, the bottom/right to full
            windows
            (the "padding" baseline of Table 5: more windows, padded tokens
            to be masked).
        ``'none'``: ``shift_size`` must be 0.

    Sizes may be traced values (:mod:`.symbolic`): every index is computed
    by arithmetic on ``arange`` (no in-place writes, no size decisions),
    so a recorded graph holds the same layout at every map size. With
    ``shift_mode='cyclic'`` the shift may be a 0-dim tensor too (Swin's
    classifier semantics decide it from the map size, branch-free, when
    recorded).
    """
    if shift_mode not in SHIFT_MODES:
        raise ValueError(f'shift_mode={shift_mode!r}; choose from '
                         f'{SHIFT_MODES}')
    dynamic_shift = isinstance(shift_size, torch.Tensor)
    if dynamic_shift and shift_mode != 'cyclic':
        raise ValueError('window_layout: a tensor shift_size is supported '
                         "with shift_mode='cyclic' only")
    wh, ww = window_pair(window_size)
    sh, sw = window_pair(shift_size)
    if not dynamic_shift and not (0 <= sh < wh and 0 <= sw < ww):
        raise ValueError(f'shift_size={shift_size} must be in '
                         f'[0, window_size={window_size})')
    # A cyclic shift by -s puts window borders at s + k*w; the padded
    # partition must cut at the same places, so it pads w - s in front.
    padded = shift_mode == 'padding'
    top = (wh - sh) % wh if padded else 0
    left = (ww - sw) % ww if padded else 0
    frame_h = ceil_div(height + top, wh) * wh
    frame_w = ceil_div(width + left, ww) * ww
    pad = (top, frame_h - height - top, left, frame_w - width - left)
    num_windows = (frame_h // wh) * (frame_w // ww)
    concrete = is_concrete(height, width) and not dynamic_shift
    # sizes as tensors for the elementwise arithmetic (the ONNX exporters
    # take a traced size as a tensor operand, not as a scalar)
    if concrete:
        fh, fw, h, w = frame_h, frame_w, height, width
    else:
        fh, fw, h, w = (size_tensor(v, device)
                        for v in (frame_h, frame_w, height, width))

    def arange(n):
        return torch.arange(n, device=device)

    cyclic = shift_mode == 'cyclic'
    roll_rows = cyclic and (dynamic_shift or sh != 0)
    roll_cols = cyclic and (dynamic_shift or sw != 0)
    # frame row/column read by each slot row/column: slot rows run window
    # after window, so slot row r is frame row r (+ s, cyclically)
    rows, cols = arange(frame_h), arange(frame_w)
    # torch.roll(x, -s)[i] == x[(i + s) % n]
    if roll_rows:
        rows = torch.remainder(rows + sh, fh)
    if roll_cols:
        cols = torch.remainder(cols + sw, fw)
    # slot (window row, window col, token row, token col), row-major
    gather_index = (rows.view(-1, 1, wh, 1) * fw +
                    cols.view(1, -1, 1, ww)).reshape(-1)
    # image token (i, j) sits at frame (i + top, j + left), which slot row
    # (i + top - s) mod frame_h reads (cyclic), or slot row i + top
    img_rows, img_cols = arange(height) + top, arange(width) + left
    # (+ frame size: non-negative operands; inductor's value ranges
    # cannot take a remainder of a possibly negative index)
    if roll_rows:
        img_rows = torch.remainder(img_rows + (fh - sh), fh)
    if roll_cols:
        img_cols = torch.remainder(img_cols + (fw - sw), fw)
    win_cols = fw // ww
    N = wh * ww
    row_part = (img_rows // wh) * (win_cols * N) + (img_rows % wh) * ww
    col_part = (img_cols // ww) * N + img_cols % ww
    scatter_index = (row_part[:, None] + col_part[None, :]).reshape(-1)
    # the image token each slot holds (h * w for padding)
    frame_rows, frame_cols = gather_index // fw, gather_index % fw
    img_r, img_c = frame_rows - top, frame_cols - left
    valid = (img_r >= 0) & (img_r < h) & (img_c >= 0) & (img_c < w)
    slot_to_image = torch.where(valid, img_r * w + img_c, h * w)
    return WindowLayout(
        pad=pad,
        num_windows=num_windows,
        gather_index=gather_index,
        scatter_index=scatter_index,
        slot_to_image=slot_to_image,
        frame_valid=valid.view(-1, N))
