"""UperNet's decoder with RSWAtt on its fused 1/4-resolution map: pixel-level
dependencies at the finest scale, before the classifier."""
from typing import Optional, Sequence

import torch.nn as nn
from mmseg.models.decode_heads import UPerHead

from mmvisattn.models.plugins import RSWAttResidual
from mmvisattn.registry import MODELS


@MODELS.register_module()
class RSWAttUPerHead(UPerHead):
    """:class:`mmseg.models.decode_heads.UPerHead` (same arguments) plus
    ``num_rswatt_blocks`` RSWAtt residual blocks on the fused features;
    ``rswatt_cfg`` goes to :class:`RSWAttResidual` (``window_sizes``,
    ``num_heads``, ``attn_cfg``)."""

    def __init__(self,
                 num_rswatt_blocks: int = 1,
                 rswatt_cfg: Optional[dict] = None,
                 **kwargs):
        super().__init__(**kwargs)
        cfg = dict(init_scale=1.0)  # a new head: no pretrained path to keep
        cfg.update(rswatt_cfg or {})
        self.rswatt_blocks = nn.Sequential(
            *[RSWAttResidual(self.channels, **cfg)
              for _ in range(num_rswatt_blocks)])

    def init_weights(self):
        super().init_weights()
        for block in self.rswatt_blocks:
            block.init_weights()

    def forward(self, inputs: Sequence):
        return self.cls_seg(self.rswatt_blocks(self._forward_feature(inputs)))

