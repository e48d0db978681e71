"""The RSWAtt source's segmentation decoder as an mmseg decode head: the
pyramid resized to 1/4 and fused to ``channels`` (256), ``num_layers`` (4)
RSWAtt transformer layers with ``num_heads`` (8) heads on that map, then
conv-BN-ReLU and the classifier conv."""
from typing import Optional, Sequence

import torch
import torch.nn as nn
from mmcv.cnn import ConvModule
from mmengine.model import ModuleList
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.utils import resize

from mmvisattn.models.backbones.base import BackboneBase
from mmvisattn.models.layers import RSWAttBlock
from mmvisattn.registry import MODELS


@MODELS.register_module()
class RSWAttHead(BaseDecodeHead):
    """Args (beyond :class:`BaseDecodeHead`'s; ``in_channels`` and
    ``in_index`` list the pyramid levels to fuse):

    num_layers (int): RSWAtt layers on the fused map (the source: 4).
    num_heads (int): their heads (the source: 8).
    scale_windows, attn_cfg: the RSWAtt layer's.
    mlp_ratio, drop_path_rate: the layers' MLP width and stochastic depth.
    """

    def __init__(self,
                 num_layers: int = 4,
                 num_heads: int = 8,
                 scale_windows: Sequence[int] = (5, 9),
                 attn_cfg: Optional[dict] = None,
                 mlp_ratio: float = 4.,
                 drop_path_rate: float = 0.,
                 **kwargs):
        super().__init__(input_transform='multiple_select', **kwargs)
        self.fuse = ConvModule(sum(self.in_channels), self.channels, 1,
                               norm_cfg=self.norm_cfg, act_cfg=self.act_cfg)
        rates = torch.linspace(0, drop_path_rate, num_layers).tolist()
        self.layers = ModuleList(
            RSWAttBlock(self.channels, num_heads, scale_windows, mlp_ratio,
                        drop_path_rate=rates[i], attn_cfg=attn_cfg)
            for i in range(num_layers))
        self.norm = nn.LayerNorm(self.channels)
        self.bottleneck = ConvModule(self.channels, self.channels, 3,
                                     padding=1, conv_cfg=self.conv_cfg,
                                     norm_cfg=self.norm_cfg,
                                     act_cfg=self.act_cfg)

    def init_weights(self):
        super().init_weights()
        BackboneBase.init_transformer(self.layers)
        for layer in self.layers:
            layer.attn.init_weights()

    def forward(self, inputs):
        feats = self._transform_inputs(inputs)
        size = feats[0].shape[2:]
        x = self.fuse(torch.cat([
            resize(f, size=size, mode='bilinear',
                   align_corners=self.align_corners) for f in feats
        ], 1))
        B, C, H, W = x.shape
        tokens = x.flatten(2).transpose(1, 2)
        for layer in self.layers:
            tokens = layer(tokens, (H, W))
        x = self.norm(tokens).transpose(1, 2).reshape(B, C, H, W)
        return self.cls_seg(self.bottleneck(x))
