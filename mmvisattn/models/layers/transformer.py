"""The pre-norm transformer layer of the token-sequence backbones (TNT's
inner and outer transformers): the package's one global multi-head
self-attention, :class:`~.attention.GlobalAttention` (``qkv``/``proj``,
the release names), and :class:`Mlp` (``fc1``/``fc2``)."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule

from .attention import GlobalAttention
from .mlp import Mlp


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
        self.attn = GlobalAttention(embed_dims, num_heads, qkv_bias=qkv_bias,
                                    attn_drop_rate=attn_drop_rate,
                                    proj_drop_rate=drop_rate)
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
