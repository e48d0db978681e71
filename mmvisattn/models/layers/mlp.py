"""The transformer MLP under the names of the released checkpoints."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer
from mmengine.model import BaseModule


class Mlp(BaseModule):
    """fc1 -> activation -> dropout -> fc2 -> dropout.

    The parameter names (``fc1``, ``fc2``) are those of the official Swin
    and TNT releases and of timm, so their checkpoints load as they are.
    """

    def __init__(self,
                 in_features: int,
                 hidden_features: int,
                 act_cfg: dict = dict(type='GELU'),
                 drop: float = 0.,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg)
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = build_activation_layer(act_cfg)
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))
