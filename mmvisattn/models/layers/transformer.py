"""Plain (global) multi-head self-attention and the pre-norm transformer
layer, shared by the token-sequence backbones (TNT's inner and outer
transformers). The attention runs on the same kernel as Swin's windows
(:func:`mmvisattn.ops.window_attention`, one window holding every token);
the MLP is :class:`Mlp` (``fc1``/``fc2``, the release names)."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule

from mmvisattn.ops import window_attention, window_attention_weights

from .mlp import Mlp


class MultiheadSelfAttention(BaseModule):
    """Self-attention over all tokens of a sequence: ``qkv`` (one linear, q
    then k then v, as timm and ``nn.MultiheadAttention`` pack them) and
    ``proj``.

    Args:
        embed_dims (int): token channels.
        num_heads (int): heads; must divide ``embed_dims``.
        qkv_bias (bool): bias on ``qkv`` (TNT has none).
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 qkv_bias: bool = False,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                             f'num_heads {num_heads}')
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def _heads(self, x: torch.Tensor):
        """q, k, v (B, 1, heads, N, d): the sequence as one window."""
        B, N, C = x.shape
        qkv = self.qkv(x).view(B, 1, N, 3, self.num_heads,
                               C // self.num_heads)
        return qkv.permute(3, 0, 1, 4, 2, 5).unbind(0)

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """(B, heads, N, N) attention probabilities of ``forward(x)``, for
        analysis (the fused kernel never returns them)."""
        q, k, _ = self._heads(x)
        return window_attention_weights(q, k)[:, 0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (B, N, C) -> (B, N, C)."""
        B, N, C = x.shape
        q, k, v = self._heads(x)
        out = window_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.)
        out = out[:, 0].transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(out))


class TransformerLayer(BaseModule):
    """Pre-norm transformer layer:
    ``x + DropPath(Attn(LN(x)))``, then ``x + DropPath(MLP(LN(x)))``.

    ``mlp_extra`` (a module or None) is applied to the MLP's output as
    ``y + mlp_extra(y)`` before the residual, for TNT's squeeze-excitation.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 mlp_ratio: float = 4.,
                 qkv_bias: bool = False,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 act_cfg: dict = dict(type='GELU'),
                 norm_cfg: dict = dict(type='LN'),
                 mlp_extra: Optional[nn.Module] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = MultiheadSelfAttention(embed_dims, num_heads, qkv_bias,
                                           attn_drop_rate, drop_rate)
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio), act_cfg,
                       drop_rate)
        self.mlp_extra = mlp_extra
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        y = self.mlp(self.norm2(x))
        if self.mlp_extra is not None:
            y = y + self.mlp_extra(y)
        return x + self.drop_path(y)
