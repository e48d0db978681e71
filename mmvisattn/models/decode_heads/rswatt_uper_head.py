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
    ``num_rswatt_blocks`` RSWAtt residual blocks (:class:`RSWAttResidual`)
    on the fused features.

    Args (beyond UPerHead's):
        num_rswatt_blocks (int): the residual blocks.
        num_heads, scale_windows, attn_cfg: the blocks' attention
            (``attn_cfg``: its ``type``, any registered RSWAtt attention,
            and its options); ``num_heads`` None: channels // 32.
        init_scale (float): the blocks' starting ``gamma``: 1, a new head
            has no pretrained path to keep.
    """

    def __init__(self,
                 num_rswatt_blocks: int = 1,
                 num_heads: Optional[int] = None,
                 scale_windows: Sequence[int] = (5, 9),
                 attn_cfg: Optional[dict] = None,
                 init_scale: float = 1.0,
                 **kwargs):
        super().__init__(**kwargs)
        self.rswatt_blocks = nn.Sequential(
            *[RSWAttResidual(self.channels, num_heads, scale_windows,
                             attn_cfg, init_scale)
              for _ in range(num_rswatt_blocks)])

    def init_weights(self):
        super().init_weights()
        for block in self.rswatt_blocks:
            block.init_weights()

    def forward(self, inputs: Sequence):
        return self.cls_seg(self.rswatt_blocks(self._forward_feature(inputs)))

