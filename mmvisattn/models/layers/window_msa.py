"""Swin's windowed attention kinds (every variant of the paper's
ablations) and the Swin block.

The windowed kinds extend multi-head self-attention
(:class:`~.attention.SelfAttention`: ``qkv``, heads, ``proj``) through
:class:`SwinAttention`, which adds the window and the learned relative
position bias (``relative_position_bias_table``, the official name, so
released checkpoints load). A kind only says how queries meet keys, through
the kernels of :mod:`mmvisattn.ops`. A backbone or block names its kind one
way, ``attn_cfg=dict(type=<class>, **options)``, and calls it ``attn(x)``:

=============================  ============================================
class (``attn_cfg.type``)      kernel
=============================  ============================================
``WindowAttention``            (shifted) windows: Swin (the default)
``SlidingWindowAttention``     every pixel's M x M neighbourhood, unfolded
                               keys
``HaloSlidingWindowAttention`` the same result from halo tiles, no unfolded
                               keys
``PerformerAttention``         FAVOR+ over all tokens (:mod:`.attention`)
``GlobalAttention``            full softmax MSA (:mod:`.attention`)
=============================  ============================================

Swin V2's ``CosineWindowAttention`` (:mod:`.swin_v2`) is window attention
with cosine logits and a continuous position bias. (RSWAtt's attention is
not a Swin kind: it is built by RSWAtt's own blocks, :mod:`.rswatt`.)
The block gives a kind the window and the shift where it takes them
(:func:`build_swin_attention`). Options of every kind:

* ``chunk_tokens``: rows per chunk on the CPU inference path.

Options of the windowed kinds (:class:`SwinAttention`):

* ``relative_position`` (default True): the learned relative position bias;
  with the backbone's ``use_abs_pos_embed`` these are the rows of the
  paper's Table 4 (the global kinds have no windows to index one by, and
  take neither option);
* ``use_content`` (default True): False drops the q.k term, leaving the
  position bias alone (Table 4's "rel. pos. w/o app.").

Options of :class:`WindowAttention` alone:

* ``shift_mode``: ``'cyclic'`` (default), ``'padding'`` (Table 5's
  baseline), ``'none'`` (W-MSA in every block);
* ``pad_small_map`` (default True): True pads a map smaller than a window
  and shifts it like any other (detection semantics, as mmdet and mmseg);
  False is the official classifiers' semantics (as mmpretrain's
  ``pad_small_map=False`` and timm's ``always_partition=False``): a map
  whose short side equals the window is not shifted, and one smaller than
  the window is refused.

An option the chosen kind does not take is an error that names it and the
kind's options (:func:`build_swin_attention`).
"""
import math
from typing import Optional, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.ops import (
    SHIFT_MODES,
    check_shift,
    check_window,
    fast_part_allowed,
    packed_weights_scope,
    padding_key_mask,
    relative_position_index,
    resize_relative_position_table,
    shifted_window_mask,
    sliding_relative_index,
    sliding_window_attention_blocked,
    sliding_window_attention_naive,
    window_attention,
    window_attention_recorded,
    window_attention_weights,
    window_layout,
    window_pair,
)
from mmvisattn.ops.symbolic import is_concrete, recording, size_tensor
from mmvisattn.registry import MODELS

from .attention import SelfAttention
from .builder import build_part
from .mlp import Mlp

DEFAULT_ATTENTION = 'WindowAttention'


def build_swin_attention(embed_dims: int, num_heads: int,
                         window_size: Union[int, Tuple[int, int]],
                         shift_size: Union[int, Tuple[int, int]] = 0,
                         qkv_bias: bool = True,
                         qk_scale: Optional[float] = None,
                         attn_drop_rate: float = 0.,
                         proj_drop_rate: float = 0.,
                         attn_cfg: Optional[dict] = None,
                         default: str = DEFAULT_ATTENTION) -> SelfAttention:
    """The attention kind of ``attn_cfg`` (``type``, by default
    ``default``, and its options), built by the one builder
    (:func:`~.builder.build_part`) with what a Swin block sets itself: of
    the block's window and shift, only what the kind takes (global
    attention has neither, sliding windows no shift)."""
    return build_part('attn_cfg', attn_cfg, SelfAttention, 'the Swin block',
                      default=default,
                      offered=dict(window_size=window_size,
                                   shift_size=shift_size),
                      embed_dims=embed_dims, num_heads=num_heads,
                      qkv_bias=qkv_bias, qk_scale=qk_scale,
                      attn_drop_rate=attn_drop_rate,
                      proj_drop_rate=proj_drop_rate)


class SwinAttention(SelfAttention):
    """Self-attention within windows (see the module doc): what the windowed
    kinds add to :class:`~.attention.SelfAttention`, a ``window_size`` and
    the learned relative position bias it indexes. Takes and returns
    channels-last maps (B, H, W, C)."""

    rectangular_windows = False  # takes an (h, w) window_size

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 window_size: Union[int, Tuple[int, int]],
                 relative_position: bool = True,
                 use_content: bool = True,
                 **kwargs):
        super().__init__(embed_dims, num_heads, **kwargs)
        window_size = check_window(window_size, type(self).__name__,
                                   pairs=self.rectangular_windows)
        if not use_content and not relative_position:
            raise ValueError(
                f'{type(self).__name__}: use_content=False without '
                'relative_position leaves no attention logits at all')
        self.window_size = window_size
        # tokens of one window (h * w)
        self.window_tokens = math.prod(window_pair(window_size))
        self.use_content = use_content
        self.relative_position = relative_position
        self.relative_position_bias_table = None
        if relative_position:
            self.build_position_bias()
        self._register_load_state_dict_pre_hook(self._resize_bias_table)

    def build_position_bias(self):
        """The learned relative position bias: a table with a row per
        offset, indexed by ``relative_position_index`` (derived, never
        loaded)."""
        rows = math.prod(2 * m - 1 for m in window_pair(self.window_size))
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros(rows, self.num_heads))
        self.register_buffer('relative_position_index',
                             relative_position_index(self.window_size),
                             persistent=False)

    def _resize_bias_table(self, state_dict, prefix, *args, **kwargs):
        """A table of another window (7 at 224, loaded at 12) is resized
        bicubically, as mmdet, mmseg and timm resize it. (The buffers
        derived from the window, ``relative_position_index`` and V2's
        ``relative_coords_table``, are rebuilt, never loaded: every layout's
        conversion drops them, ``swin_convert.drop_derived_buffers``.)"""
        table = state_dict.get(prefix + 'relative_position_bias_table')
        own = self.relative_position_bias_table
        if table is not None and own is not None and \
                table.dim() == 2 and table.shape[1] == own.shape[1] and \
                table.shape[0] != own.shape[0]:
            state_dict[prefix + 'relative_position_bias_table'] = \
                resize_relative_position_table(table, self.window_size)

    def init_weights(self):
        super().init_weights()
        if self.relative_position_bias_table is not None:
            trunc_normal_(self.relative_position_bias_table, std=.02)

    # ------------------------------------------------------------ position
    def _bias_table_rows(self, index: torch.Tensor) -> torch.Tensor:
        """(len(index), heads) bias of the offsets ``index`` names: rows of
        the bias table, gathered on every call:
        a few thousand values, and a cached copy could outlive a weight
        change no key sees (an EMA swap through ``.data``)."""
        return self.relative_position_bias_table[index]

    def window_bias(self) -> Optional[torch.Tensor]:
        """(heads, N, N) relative position bias of a window, or None."""
        if not self.relative_position:
            return None
        N = self.window_tokens
        rows = self._bias_table_rows(self.relative_position_index.view(-1))
        # contiguous: CUDA's fused SDPA kernels refuse a mask whose last
        # dimension is strided (this permuted view's is `heads`) and fall
        # back to the math kernel (seen on an H200, tests/test_cuda.py)
        return rows.view(N, N, self.num_heads).permute(2, 0, 1).contiguous()

    def sliding_bias(self, device) -> Optional[torch.Tensor]:
        """(heads, M*M) bias of each neighbour offset, or None."""
        if not self.relative_position:
            return None
        return self._bias_table_rows(
            sliding_relative_index(self.window_size, device)).T

    def _map_qkv(self, x: torch.Tensor):
        """q, k, v (B, heads, H*W, d) of a (B, H, W, C) map."""
        B, H, W, C = x.shape
        return self._split_heads(self.project_qkv(x.view(B, H * W, C)))


@MODELS.register_module()
class WindowAttention(SwinAttention):
    """(Shifted) window attention, the Swin default: tokens attend within
    non-overlapping M x M windows (or h x w, ``window_size=(h, w)``),
    displaced by ``shift_size`` (the block's: 0 for W-MSA, M // 2 for
    SW-MSA); ``shift_mode`` says how shifted windows handle the windows
    that cross the border; ``pad_small_map`` how a map of at most one window
    is treated (see the module doc)."""

    rectangular_windows = True

    def __init__(self, *args, shift_size: Union[int, Tuple[int, int]] = 0,
                 shift_mode: str = 'cyclic', pad_small_map: bool = True,
                 **kwargs):
        super().__init__(*args, **kwargs)
        if shift_mode not in SHIFT_MODES:
            raise ValueError(f'WindowAttention: shift_mode={shift_mode!r}; '
                             f'choose from {SHIFT_MODES}')
        if not pad_small_map and not isinstance(self.window_size, int):
            raise ValueError(
                f'{type(self).__name__}: pad_small_map=False (the '
                'classifiers\' rule for a map of one window) takes a square '
                f'window, not window_size={self.window_size}')
        self.shift_size = check_shift(shift_size, self.window_size,
                                      type(self).__name__)
        self.shift_mode = shift_mode
        self.pad_small_map = pad_small_map

    def _window_setup(self, x: torch.Tensor):
        """Window slots and additive mask of one call on ``x`` (B, H, W, C):
        ``(layout, mask or None, tokens)``, tokens (B, frame pixels, C) of
        the zero-padded frame that ``layout.gather_index`` reads.

        With traced sizes (an exporter or tracer records the graph, see
        :mod:`mmvisattn.ops.symbolic`) nothing here decides on the size in
        Python: the frame is always padded (by 0 where nothing is missing),
        and ``pad_small_map=False``'s "no shift when a side is one window"
        is a 0-dim tensor shift computed in the graph."""
        B, H, W, C = x.shape
        ws, shift_size = self.window_size, self.shift_size
        concrete = is_concrete(H, W)
        if not self.pad_small_map and concrete:
            if min(H, W) < ws:
                raise ValueError(
                    f'a {H}x{W} map is smaller than the {ws}x{ws} window '
                    'and pad_small_map=False (classifier semantics); use a '
                    'larger input, a smaller window_size or '
                    'pad_small_map=True')
            if min(H, W) == ws:
                shift_size = 0  # one window across: not shifted
        elif not self.pad_small_map and shift_size:
            if self.shift_mode == 'cyclic':
                # the same rule in the graph: shift only where both
                # sides exceed one window (a map smaller than the window,
                # which eager refuses, is padded and left unshifted)
                small = torch.minimum(size_tensor(H, x.device),
                                      size_tensor(W, x.device)) <= ws
                shift_size = shift_size * (~small).long()
            else:
                raise NotImplementedError(
                    "WindowAttention(shift_mode='padding', "
                    'pad_small_map=False) cannot be recorded with traced '
                    'map sizes (torch.jit.trace, torch.onnx.export with '
                    'dynamo=False, or dynamic shapes): whether a map is '
                    'shifted, and so how much it is padded, depends on its '
                    "size; export it with pad_small_map=True, shift_mode="
                    "'cyclic', or static shapes under dynamo=True")
        mode = self.shift_mode if (isinstance(shift_size, torch.Tensor)
                                   or any(window_pair(shift_size))) \
            else 'none'
        if mode == 'none':
            shift_size = 0
        layout = window_layout(H, W, ws, shift_size,
                               'cyclic' if mode == 'none' else mode,
                               x.device)
        top, bottom, left, right = layout.pad
        if not is_concrete(*layout.pad) or any(layout.pad):
            x = F.pad(x, (0, 0, left, right, top, bottom))
        if mode == 'cyclic':
            Hf, Wf = H + top + bottom, W + left + right
            mask = shifted_window_mask(Hf, Wf, ws, shift_size, x.device)
        elif mode == 'padding':
            mask = padding_key_mask(layout.frame_valid)
        else:
            mask = None
        return layout, mask, x.reshape(B, -1, C)

    def window_probabilities(self, x: torch.Tensor):
        """What the window kernel never returns, for analysis: ``(probs, v,
        layout, mask)`` of ``forward(x)``, probs (B, windows, heads, N, N)
        and v (B, windows, heads, N, d) in ``layout``'s window slots."""
        B, C, N = x.shape[0], x.shape[-1], self.window_tokens
        layout, mask, tokens = self._window_setup(x)
        windows = tokens.index_select(1, layout.gather_index).view(
            B, layout.num_windows, N, C)
        q, k, v = self._split_heads(self.project_qkv(windows))
        probs = window_attention_weights(q, k, self.window_bias(), mask,
                                         self.scale, self.use_content)
        return probs, v, layout, mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, H, W, C) -> (B, H, W, C): roll + partition in one gather,
        attention in every window, reverse + roll back + crop in one
        gather."""
        B, H, W, C = x.shape
        layout, mask, tokens = self._window_setup(x)
        if fast_part_allowed(self, x, 'window_chunks'):
            out = self.attend_in_chunks(tokens, layout, mask, (H, W))
        else:
            windows = tokens.index_select(1, layout.gather_index).view(
                B, layout.num_windows, self.window_tokens, C)
            out = self.attend_windows(windows, mask, self.window_bias())
            out = out.view(B, -1, C).index_select(
                1, layout.scatter_index).view(B, H, W, C)
        return self.proj_drop(out)

    def attend_windows(self, windows: torch.Tensor,
                       mask: Optional[torch.Tensor],
                       bias: Optional[torch.Tensor]) -> torch.Tensor:
        """(B, windows, N, C) -> (B, windows, N, C): attention within each
        window, projected; ``mask`` (windows, N, N) and ``bias`` (heads,
        N, N, :meth:`window_bias`) or None."""
        B, nW, N, C = windows.shape
        dropout_p = self.attn_drop_rate if self.training else 0.
        if recording():
            # one batched call whose window count may be a traced value;
            # (3, B, heads, windows, N, d): heads first, see
            # window_attention_recorded
            q, k, v = self.project_qkv(windows).view(
                B, nW, N, 3, self.num_heads, -1).permute(
                    3, 0, 4, 1, 2, 5).contiguous().unbind(0)
            out = window_attention_recorded(
                q, k, v, bias=bias, mask=mask,
                scale=self.scale, dropout_p=dropout_p,
                use_content=self.use_content)
            return self.proj(out.permute(0, 2, 3, 1, 4).reshape(B, nW, N, C))
        q, k, v = self._split_heads(self.project_qkv(windows))
        out = window_attention(q, k, v, bias=bias, mask=mask,
                               scale=self.scale, dropout_p=dropout_p,
                               use_content=self.use_content)
        return self.proj(out.transpose(2, 3).reshape(B, nW, N, C))

    def attend_in_chunks(self, tokens: torch.Tensor, layout,
                         mask: Optional[torch.Tensor],
                         hw_shape: Tuple[int, int]) -> torch.Tensor:
        """:meth:`attend_windows` of every window of ``tokens`` (B, L', C)
        in ``layout``'s slots, ``chunk_tokens`` rows at a time: the fast
        path's ``'window_chunks'`` part (eval, nothing recording:
        :func:`mmvisattn.ops.fast_path_allowed`), so that a chunk's q/k/v
        and logits stay in the CPU's cache; each chunk is scattered to its
        image tokens while it is there (reverse + roll back + crop, padded
        slots landing in a scratch row), and the linears are packed once
        for all chunks. Returns the (B, H, W, C) map."""
        B, _, C = tokens.shape
        H, W = hw_shape
        L, N, nW = H * W, self.window_tokens, layout.num_windows
        bias = self.window_bias()
        per_chunk = max(1, self.chunk_tokens // N)
        out = None  # (B * (L + 1), C): each image's tokens, then its scratch
        with packed_weights_scope():
            # chunks never straddle images: a chunk's mask rows are mask[s:e]
            for b in range(B):
                for s in range(0, nW, per_chunk):
                    e = min(nW, s + per_chunk)
                    slots = slice(s * N, e * N)
                    windows = tokens[b].index_select(
                        0, layout.gather_index[slots]).view(1, e - s, N, C)
                    attended = self.attend_windows(
                        windows, None if mask is None else mask[s:e], bias)
                    if out is None:  # the attention's dtype (autocast's)
                        out = attended.new_empty(B * (L + 1), C)
                    out.index_copy_(0, layout.slot_to_image[slots] +
                                    b * (L + 1), attended.view(-1, C))
        return out.view(B, L + 1, C)[:, :L].unflatten(1, (H, W))


@MODELS.register_module()
class SlidingWindowAttention(SwinAttention):
    """Sliding-window attention: every pixel attends its own M x M
    neighbourhood (the image border masked), keys unfolded: the simple,
    memory-hungry reference of Table 5."""

    kernel = staticmethod(sliding_window_attention_naive)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        q, k, v = (t.view(B, self.num_heads, H, W, -1)
                   for t in self._map_qkv(x))
        out = self.kernel(q, k, v, self.window_size,
                          bias=self.sliding_bias(x.device), scale=self.scale,
                          use_content=self.use_content)
        return self.proj(out.permute(0, 2, 3, 1, 4).reshape(B, H, W, C))


@MODELS.register_module()
class HaloSlidingWindowAttention(SlidingWindowAttention):
    """Sliding-window attention from halo tiles: the same result as
    :class:`SlidingWindowAttention` without unfolding the keys."""

    kernel = staticmethod(sliding_window_attention_blocked)


class SwinBlock(BaseModule):
    """Pre-norm Swin block (Swin paper, eq. 3): (S)W-MSA and an MLP, each on
    the LayerNorm of its input and added back through DropPath.

    With ``shift_size > 0`` and cyclic shifting the map is rolled by
    ``-shift_size`` before partitioning and a batched mask keeps
    wrapped-around tokens apart (sec. 3.2, fig. 4). Maps are zero-padded at
    the bottom/right to window multiples, as in the official detection
    code, so any size works, including maps smaller than a window.
    ``attn_cfg`` selects the attention kind and its options
    (``dict(type='WindowAttention', shift_mode=...)``; see the module doc);
    without a ``type``, the block's ``default_attention``. What makes CPU
    inference fast lives in the parts (:mod:`mmvisattn.ops.backend`), not
    here.
    """

    default_attention = DEFAULT_ATTENTION

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 window_size: Union[int, Tuple[int, int]] = 7,
                 shift_size: Union[int, Tuple[int, int]] = 0,
                 mlp_ratio: float = 4.,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 act_cfg: dict = dict(type='GELU'),
                 norm_cfg: dict = dict(type='LN'),
                 with_cp: bool = False,
                 attn_cfg: Optional[dict] = None,
                 init_cfg=None):
        super().__init__(init_cfg)
        window_size = check_window(window_size, type(self).__name__)
        shift_size = check_shift(shift_size, window_size, type(self).__name__)
        self.window_size = window_size
        self.shift_size = shift_size
        self.with_cp = with_cp
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = build_swin_attention(embed_dims, num_heads, window_size,
                                         shift_size, qkv_bias, qk_scale,
                                         attn_drop_rate, drop_rate, attn_cfg,
                                         self.default_attention)
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio), act_cfg,
                       drop_rate, drop_path_rate,
                       chunk_rows=self.attn.chunk_tokens)

    def forward(self, x: torch.Tensor, hw_shape: Tuple[int, int]
                ) -> torch.Tensor:
        """x: (B, H*W, C) tokens of an (H, W) map."""
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self.residual_branches, x, hw_shape,
                                 use_reentrant=False)
        return self.residual_branches(x, hw_shape)

    def residual_branches(self, x: torch.Tensor,
                          hw_shape: Tuple[int, int]) -> torch.Tensor:
        B, L, C = x.shape
        attn = self.attn(self.norm1(x).view(B, *hw_shape, C))
        x = x + self.drop_path(attn.view(B, L, C))
        # x + DropPath(MLP(LN(x))): the MLP adds its identity, as mmcv's FFN
        return self.mlp(self.norm2(x), identity=x)
