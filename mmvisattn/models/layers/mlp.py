"""The transformer MLP under the names of the released checkpoints."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer
from mmengine.model import BaseModule

from mmvisattn.ops import fast_part_allowed, packed_weights_scope

from .linear import PackedLinear


class Mlp(BaseModule):
    """fc1 -> activation -> dropout -> fc2 -> dropout.

    The parameter names (``fc1``, ``fc2``) are those of the official Swin
    and TNT releases and of timm, so their checkpoints load as they are.
    With ``chunk_rows``, CPU inference runs that many rows at a time (the
    fast path's ``'mlp_chunks'`` part, :mod:`mmvisattn.ops.backend`), so
    that a chunk's hidden state (``hidden_features`` wide) stays in the
    CPU's cache instead of streaming through memory between the two
    linears; the result is the same.
    """

    def __init__(self,
                 in_features: int,
                 hidden_features: int,
                 act_cfg: dict = dict(type='GELU'),
                 drop: float = 0.,
                 chunk_rows: Optional[int] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg)
        self.fc1 = PackedLinear(in_features, hidden_features)
        self.act = build_activation_layer(act_cfg)
        self.drop1 = nn.Dropout(drop)
        self.fc2 = PackedLinear(hidden_features, in_features)
        self.drop2 = nn.Dropout(drop)
        self.chunk_rows = chunk_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if self.chunk_rows and rows > self.chunk_rows and \
                fast_part_allowed(self, x, 'mlp_chunks'):
            return self.forward_in_chunks(x)
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))

    def forward_in_chunks(self, x: torch.Tensor) -> torch.Tensor:
        """``forward`` in eval mode (dropout is the identity), ``chunk_rows``
        rows at a time, each linear packed once for all chunks."""
        flat = x.reshape(-1, x.shape[-1])
        with packed_weights_scope():
            out = torch.cat([self.fc2(self.act(self.fc1(rows)))
                             for rows in flat.split(self.chunk_rows)])
        return out.view(*x.shape[:-1], out.shape[-1])
