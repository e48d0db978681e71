"""The transformer MLP under the names of the released checkpoints."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer
from mmengine.model import BaseModule

# mmcv's ``FFN`` (num_fcs=2), which our blocks used before, named the two
# linears ``layers.0.0`` and ``layers.1``; checkpoints written then still load.
_FFN_KEYS = (('layers.0.0.', 'fc1.'), ('layers.1.', 'fc2.'))


def rename_ffn_keys(state_dict: dict, prefix: str) -> None:
    """In place: ``{prefix}layers.0.0.*`` / ``layers.1.*`` -> ``fc1`` /
    ``fc2`` (mmcv ``FFN`` names -> the release's)."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        for old, new in _FFN_KEYS:
            if key.startswith(prefix + old):
                state_dict[prefix + new + key[len(prefix + old):]] = \
                    state_dict.pop(key)
                break


class Mlp(BaseModule):
    """fc1 -> activation -> dropout -> fc2 -> dropout.

    The parameter names (``fc1``, ``fc2``) are those of the official Swin
    and TNT releases and of timm, so their checkpoints load as they are.
    Older checkpoints of ours (mmcv ``FFN`` names) are renamed on load by a
    state-dict pre-hook, so ``load_state_dict``, mmengine's ``load_from`` /
    ``resume`` and ``init_cfg`` all read them.
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
        self._register_load_state_dict_pre_hook(self._rename_ffn_keys)

    @staticmethod
    def _rename_ffn_keys(state_dict, prefix, *args, **kwargs):
        rename_ffn_keys(state_dict, prefix)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))
