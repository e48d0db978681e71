"""RSWAtt as a plug-in for existing models: inside mmdet's ResNet
bottlenecks (``plugins=``) and as a neck that enhances every FPN level
before the dense / RoI heads. Both add ``gamma * RSWAtt(LN(x))`` to their
input with ``gamma`` starting at zero, so a pretrained network starts
exactly as it was and learns how much pixel-level attention to use."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmengine.model import BaseModule, ModuleList

from mmvisattn.models.layers import build_rswatt_attention
from mmvisattn.registry import MODELS


class RSWAttResidual(BaseModule):
    """``x + gamma * RSWAtt(LN(x))`` on (B, C, H, W) maps; ``gamma`` is a
    per-channel scale initialised to ``init_scale`` (0).

    Args:
        channels (int): C.
        num_heads (int, optional): the attention's heads; None: C // 32.
        scale_windows (int | sequence): the largest window of each scale.
        attn_cfg (dict, optional): the attention's ``type`` (any registered
            RSWAtt attention, :class:`ReconstructedWindowAttention` by
            default) and its options (``window_predictor``,
            ``reconstruction``, ``fusion``...).
        init_scale (float): ``gamma``'s starting value.
    """

    def __init__(self,
                 channels: int,
                 num_heads: Optional[int] = None,
                 scale_windows: Sequence[int] = (5, 9),
                 attn_cfg: Optional[dict] = None,
                 init_scale: float = 0.,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        num_heads = num_heads or max(1, channels // 32)
        self.norm = nn.LayerNorm(channels)
        self.attn = build_rswatt_attention(type(self).__name__, attn_cfg,
                                           channels, num_heads, scale_windows)
        self.gamma = nn.Parameter(torch.full((channels, ), init_scale))

    def init_weights(self):
        self.attn.init_weights()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.attn(self.norm(x.permute(0, 2, 3, 1))).out
        return x + (y * self.gamma).permute(0, 3, 1, 2)


@MODELS.register_module()
class RSWAttPlugin(RSWAttResidual):
    """For mmdet's ResNet: ``plugins=[dict(cfg=dict(
    type='mmvisattn.RSWAttPlugin', scale_windows=(5, 9)), stages=(False,
    True, True, True), position='after_conv3')]``; ResNet passes
    ``in_channels``."""
    _abbr_ = 'rswatt'

    def __init__(self, in_channels: int, **kwargs):
        super().__init__(in_channels, **kwargs)


@MODELS.register_module()
class RSWAttNeck(BaseModule):
    """A neck after the FPN: every level through its own (or one shared)
    :class:`RSWAttResidual`. In a config: ``neck=[dict(type='FPN', ...),
    dict(type='mmvisattn.RSWAttNeck', in_channels=256, num_levels=5)]``.

    Args:
        in_channels (int): the levels' channels.
        num_levels (int): how many levels it receives.
        num_heads, scale_windows, attn_cfg, init_scale: each
            :class:`RSWAttResidual`'s.
        share_weights (bool): one block for every level.
    """

    def __init__(self,
                 in_channels: int,
                 num_levels: int,
                 num_heads: Optional[int] = None,
                 scale_windows: Sequence[int] = (5, 9),
                 attn_cfg: Optional[dict] = None,
                 init_scale: float = 0.,
                 share_weights: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.num_levels = num_levels
        count = 1 if share_weights else num_levels
        self.blocks = ModuleList(
            RSWAttResidual(in_channels, num_heads, scale_windows, attn_cfg,
                           init_scale) for _ in range(count))

    def forward(self, feats: Tuple[torch.Tensor, ...]
                ) -> Tuple[torch.Tensor, ...]:
        if len(feats) != self.num_levels:
            raise ValueError(f'RSWAttNeck: got {len(feats)} levels, '
                             f'num_levels={self.num_levels}')
        return tuple(self.blocks[min(i, len(self.blocks) - 1)](f)
                     for i, f in enumerate(feats))
