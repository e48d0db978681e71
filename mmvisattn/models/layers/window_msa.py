"""Window multi-head self-attention and the Swin Transformer block."""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmcv.cnn.bricks.transformer import FFN
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.ops import (pad_to_multiple, relative_position_index,
                           shifted_window_mask, window_attention,
                           window_partition, window_reverse)


class WindowMSA(BaseModule):
    """W-MSA with a learned relative position bias (Swin paper, eq. 4).

    Parameter names follow the official release (``qkv``, ``proj``,
    ``relative_position_bias_table``). The index is derived, so it is a
    non-persistent buffer.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 window_size: int,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 attn_drop_rate: float = 0.,
                 proj_drop_rate: float = 0.,
                 init_cfg=None):
        super().__init__(init_cfg)
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims={embed_dims} is not divisible by '
                             f'num_heads={num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.window_size = window_size
        self.scale = qk_scale or (embed_dims // num_heads)**-0.5
        self.attn_drop_rate = attn_drop_rate
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size - 1)**2, num_heads))
        self.register_buffer(
            'relative_position_index',
            relative_position_index(window_size),
            persistent=False)
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.relative_position_bias_table, std=.02)

    def relative_position_bias(self) -> torch.Tensor:
        """(heads, N, N) bias gathered from the table."""
        N = self.window_size**2
        bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)]
        return bias.view(N, N, self.num_heads).permute(2, 0, 1)

    def forward(self, windows: torch.Tensor,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """windows: (B, num_windows, N, C); mask: (num_windows, N, N) or None."""
        B, nW, N, C = windows.shape
        qkv = self.qkv(windows).view(B, nW, N, 3, self.num_heads,
                                     C // self.num_heads)
        q, k, v = qkv.permute(3, 0, 1, 4, 2, 5).unbind(0)  # B, nW, h, N, d
        out = window_attention(
            q, k, v,
            bias=self.relative_position_bias(),
            mask=mask,
            scale=self.scale,
            dropout_p=self.attn_drop_rate if self.training else 0.)
        out = out.transpose(2, 3).reshape(B, nW, N, C)
        return self.proj_drop(self.proj(out))


class SwinBlock(BaseModule):
    """Pre-norm Swin block: (S)W-MSA + MLP, each with a residual.

    With ``shift_size > 0`` the map is cyclically shifted by ``-shift_size``
    before partitioning and the batched mask from ``shifted_window_mask``
    keeps wrapped-around tokens apart (Swin paper, sec. 3.2, fig. 4).
    Maps are zero-padded at the bottom/right to window multiples, as in the
    official detection code, so any size works, including maps smaller than
    a window.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 window_size: int = 7,
                 shift_size: int = 0,
                 mlp_ratio: float = 4.,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 act_cfg: dict = dict(type='GELU'),
                 norm_cfg: dict = dict(type='LN'),
                 with_cp: bool = False,
                 init_cfg=None):
        super().__init__(init_cfg)
        if not 0 <= shift_size < window_size:
            raise ValueError(f'shift_size={shift_size} must be in '
                             f'[0, window_size={window_size})')
        self.window_size = window_size
        self.shift_size = shift_size
        self.with_cp = with_cp
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = WindowMSA(embed_dims, num_heads, window_size, qkv_bias,
                              qk_scale, attn_drop_rate, drop_rate)
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.mlp = FFN(
            embed_dims=embed_dims,
            feedforward_channels=int(embed_dims * mlp_ratio),
            num_fcs=2,
            ffn_drop=drop_rate,
            dropout_layer=dict(type='DropPath', drop_prob=drop_path_rate),
            act_cfg=act_cfg,
            add_identity=True)

    def window_msa(self, x: torch.Tensor,
                   hw_shape: Tuple[int, int]) -> torch.Tensor:
        B, L, C = x.shape
        H, W = hw_shape
        ws, shift = self.window_size, self.shift_size
        x = pad_to_multiple(x.view(B, H, W, C), ws)
        Hp, Wp = x.shape[1:3]
        mask = None
        if shift:
            x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
            mask = shifted_window_mask(Hp, Wp, ws, shift, x.device)
        x = window_reverse(
            self.attn(window_partition(x, ws), mask), ws, (Hp, Wp))
        if shift:
            x = torch.roll(x, shifts=(shift, shift), dims=(1, 2))
        return x[:, :H, :W].reshape(B, L, C)

    def forward(self, x: torch.Tensor, hw_shape: Tuple[int, int]
                ) -> torch.Tensor:

        def inner(x):
            x = x + self.drop_path(self.window_msa(self.norm1(x), hw_shape))
            return self.mlp(self.norm2(x), identity=x)

        if self.with_cp and x.requires_grad:
            return cp.checkpoint(inner, x, use_reentrant=False)
        return inner(x)
