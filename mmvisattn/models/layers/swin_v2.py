"""Swin Transformer V2's parts (Liu et al., CVPR 2022), each a small
registered class over Swin V1's: the attention, the block and the patch
merging. Parameter names are the authors' release's (``q_bias``,
``v_bias``, ``logit_scale``, ``cpb_mlp``; timm's too), so their
checkpoints load as they are.

- :class:`CosineWindowAttention`: scaled cosine attention, ``cos(q, k)``
  times a learned per-head scale (clamped at 100, sec. 3.2), plus the
  log-spaced continuous position bias: a 2-layer MLP over the window's
  log-spaced offsets, ``16 * sigmoid``. Everything else (windows, shifts,
  padding, masks, every backend and export path) is window attention's.
- :class:`ResPostNormSwinBlock`: the residual post-norm block,
  ``x + DropPath(LN(Attn(x)))`` then ``x + DropPath(LN(MLP(x)))``.
- :class:`PostNormPatchMerging`: the 2x2 concatenation projected first,
  then normalised (over the merged channels).
"""
import math
from typing import Tuple, Union

import torch
import torch.nn as nn

from mmvisattn.ops import (
    check_window,
    log_spaced_relative_coords,
    relative_position_index,
)
from mmvisattn.registry import MODELS

from .patch import PatchMerging
from .window_msa import SwinBlock, WindowAttention

#: The cap of the learned logit scale, log(1 / 0.01) (the paper's tau >= 0.01).
LOGIT_SCALE_MAX = math.log(100.)


@MODELS.register_module()
class CosineWindowAttention(WindowAttention):
    """Swin V2's (shifted) window attention (see the module doc).

    Options beyond :class:`WindowAttention`'s:

    * ``pretrained_window_size`` (default 0: this window): the window the
      weights were pre-trained at; offsets are normalised by it, so a
      checkpoint from window 8 runs at window 16 with nothing resized;
    * ``cpb_hidden_dims`` (default 512): the position MLP's width.

    ``qkv_bias`` gives ``q_bias`` and ``v_bias`` (the key has none); the
    ``qk_scale`` of V1 has no meaning here and is refused.
    """

    def __init__(self, embed_dims: int, num_heads: int, window_size,
                 qkv_bias: bool = True, qk_scale=None,
                 pretrained_window_size: Union[int, Tuple[int, int]] = 0,
                 cpb_hidden_dims: int = 512, **kwargs):
        if qk_scale is not None:
            raise ValueError(
                f'CosineWindowAttention: qk_scale={qk_scale}: cosine '
                'attention learns its scale per head (logit_scale)')
        pretrained_window_size = check_window(
            pretrained_window_size, 'CosineWindowAttention',
            'pretrained_window_size', minimum=0)
        self.pretrained_window_size = pretrained_window_size
        self.cpb_hidden_dims = cpb_hidden_dims
        super().__init__(embed_dims, num_heads, window_size, qkv_bias=False,
                         **kwargs)
        self.scale = 1.  # the learned logit_scale is folded into q
        self.register_buffer(
            'head_membership',
            torch.eye(num_heads).repeat_interleave(embed_dims // num_heads,
                                                   0),
            persistent=False)
        self.logit_scale = nn.Parameter(
            torch.full((num_heads, 1, 1), math.log(10.)))
        if qkv_bias:
            self.q_bias = nn.Parameter(torch.zeros(embed_dims))
            self.v_bias = nn.Parameter(torch.zeros(embed_dims))
        else:
            self.q_bias = self.v_bias = None

    def build_position_bias(self):
        """The continuous position bias: ``cpb_mlp`` over the window's
        log-spaced offsets (a derived buffer, never loaded)."""
        self.cpb_mlp = nn.Sequential(
            nn.Linear(2, self.cpb_hidden_dims),
            nn.ReLU(inplace=True),
            nn.Linear(self.cpb_hidden_dims, self.num_heads, bias=False))
        self.register_buffer(
            'relative_coords_table',
            log_spaced_relative_coords(self.window_size,
                                       self.pretrained_window_size),
            persistent=False)
        self.register_buffer('relative_position_index',
                             relative_position_index(self.window_size),
                             persistent=False)

    def init_weights(self):
        super().init_weights()
        with torch.no_grad():
            self.logit_scale.fill_(math.log(10.))
            if self.q_bias is not None:
                self.q_bias.zero_()
                self.v_bias.zero_()

    def _bias_table_rows(self, index: torch.Tensor) -> torch.Tensor:
        table = self.cpb_mlp(self.relative_coords_table)
        return 16 * torch.sigmoid(table[index])

    def project_qkv(self, x: torch.Tensor) -> torch.Tensor:
        """(*, L, C) -> (*, L, 3C) with q and k unit length per head and
        q times the head's clamped scale, so that the softmax kernel's
        q.k (scale 1) is the scaled cosine."""
        # the module call (not F.linear on its weight), so that FLOP
        # counters, hooks and packed inference see the projection
        qkv = self.qkv(x)
        if self.q_bias is not None:
            qkv = qkv + torch.cat((self.q_bias, torch.zeros_like(self.q_bias),
                                   self.v_bias))
        q, k, v = qkv.chunk(3, -1)
        scale = self.logit_scale.clamp(max=LOGIT_SCALE_MAX).exp().view(1, -1)
        q = q * self._per_channel(scale / self._head_norms(q))
        k = k * self._per_channel(1. / self._head_norms(k))
        return torch.cat((q, k, v), -1)

    # Per-head norms as products with the (C, heads) 0/1 membership
    # matrix: no reshape of the token axes, which an exporter may hold as
    # traced sizes (a respelled shape is specialised to the size seen).
    def _head_norms(self, x: torch.Tensor) -> torch.Tensor:
        """(*, C) -> (*, heads) L2 norm of each head's slice, at least
        ``F.normalize``'s 1e-12 (fp16: the square's floor must be a number
        fp16 holds). Clamped before the root, whose gradient at 0 is
        infinite: a zero-padded token's key is 0 (keys have no bias)."""
        squares = (x * x) @ self.head_membership  # autocast: maybe fp16
        floor = 1e-7 if squares.dtype == torch.float16 else 1e-24
        return squares.clamp_min(floor).sqrt()

    def _per_channel(self, per_head: torch.Tensor) -> torch.Tensor:
        """(*, heads) -> (*, C), each head's value on its channels."""
        return per_head @ self.head_membership.T


@MODELS.register_module()
class ResPostNormSwinBlock(SwinBlock):
    """Swin V2's block: the residual post-norm of sec. 3.1 (``norm1`` and
    ``norm2`` normalise each branch's output before its residual add).
    Takes :class:`SwinBlock`'s arguments; its attention by default is
    :class:`CosineWindowAttention`."""

    default_attention = 'CosineWindowAttention'

    def residual_branches(self, x: torch.Tensor,
                          hw_shape: Tuple[int, int]) -> torch.Tensor:
        B, L, C = x.shape
        attn = self.attn(x.view(B, *hw_shape, C))
        x = x + self.drop_path(self.norm1(attn.view(B, L, C)))
        # the norm sits between the MLP and the residual: no identity given
        return x + self.drop_path(self.norm2(self.mlp(x)))


class PostNormPatchMerging(PatchMerging):
    """Swin V2's patch merging: the 2x2 neighbourhood (official order)
    projected to ``out_channels``, then normalised over them."""

    norm_channels = 'out'

    def forward(self, x: torch.Tensor, hw_shape: Tuple[int, int]
                ) -> Tuple[torch.Tensor, Tuple[int, int]]:
        x, hw_shape = self.merge(x, hw_shape)
        x = self.reduction(x)
        return (x if self.norm is None else self.norm(x)), hw_shape
