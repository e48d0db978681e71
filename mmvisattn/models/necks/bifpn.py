"""BiFPN (Tan et al., "EfficientDet", CVPR 2020) in the form the Swin
authors used it for RepPoints v2 (Swin paper, Table 2): inputs C3-C5, P6 and
P7 max-pooled from the last input, every input projected by a 1x1 conv,
repeated bidirectional passes with fast normalised fusion followed by swish,
and 3x3 fusion convs with a norm and no activation.
"""
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import ConvModule
from mmengine.model import BaseModule
from torch import Tensor

from mmvisattn.registry import MODELS


def _down(x: Tensor) -> Tensor:
    return F.max_pool2d(x, 3, stride=2, padding=1)


class WeightedFusion(nn.Module):
    """EfficientDet's fast normalised fusion: ``swish(sum_i w_i x_i /
    (sum_i w_i + eps))`` with ``w = relu(learned)``, the weights starting
    equal."""

    def __init__(self, num_inputs: int, eps: float = 1e-4) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_inputs))
        self.eps = eps

    def forward(self, inputs: Sequence[Tensor]) -> Tensor:
        if len(inputs) != self.weight.numel():
            raise ValueError(f'WeightedFusion of {self.weight.numel()} '
                             f'inputs got {len(inputs)}')
        weight = self.weight.relu()
        weight = weight / (weight.sum() + self.eps)
        return F.silu(sum(w * x for w, x in zip(weight, inputs)))


class BiFPNLayer(nn.Module):
    """One top-down then bottom-up pass over ``len(in_channels)`` levels.

    Inputs whose channels differ from ``out_channels`` are first projected
    by a 1x1 conv. Top-down, level i fuses itself with the upsampled level
    i+1; bottom-up, level i+1 fuses the max-pooled level i, its top-down
    output and its projected input (the top level has no top-down output
    of its own, so two inputs), each fusion followed by a 3x3 conv.
    """

    def __init__(self, in_channels: Sequence[int], out_channels: int,
                 norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None) -> None:
        super().__init__()
        num_levels = len(in_channels)
        self.projections = nn.ModuleList(
            ConvModule(c, out_channels, 1, norm_cfg=norm_cfg,
                       act_cfg=act_cfg) if c != out_channels else
            nn.Identity() for c in in_channels)

        def fusion_conv():
            return ConvModule(out_channels, out_channels, 3, padding=1,
                              norm_cfg=norm_cfg, act_cfg=None)

        self.top_down_fusions = nn.ModuleList(
            WeightedFusion(2) for _ in range(num_levels - 1))
        self.top_down_convs = nn.ModuleList(
            fusion_conv() for _ in range(num_levels - 1))
        self.bottom_up_fusions = nn.ModuleList(
            WeightedFusion(3 if i < num_levels - 1 else 2)
            for i in range(1, num_levels))
        self.bottom_up_convs = nn.ModuleList(
            fusion_conv() for _ in range(num_levels - 1))

    def forward(self, inputs: Sequence[Tensor]) -> List[Tensor]:
        inputs = [proj(x) for proj, x in zip(self.projections, inputs)]
        outs = list(inputs)
        for i in range(len(outs) - 1, 0, -1):
            up = F.interpolate(outs[i], size=outs[i - 1].shape[-2:],
                               mode='nearest')
            outs[i - 1] = self.top_down_convs[i - 1](
                self.top_down_fusions[i - 1]([outs[i - 1], up]))
        for i in range(len(outs) - 1):
            fused = [_down(outs[i]), outs[i + 1]]
            if i + 1 < len(outs) - 1:
                fused.append(inputs[i + 1])
            outs[i + 1] = self.bottom_up_convs[i](
                self.bottom_up_fusions[i](fused))
        return outs


@MODELS.register_module()
class BiFPN(BaseModule):
    """Bidirectional feature pyramid.

    Args:
        in_channels (list[int]): channels of the backbone levels used.
        out_channels (int): channels of every output level.
        num_outs (int): output levels; those beyond the inputs are
            max-pooled (3x3, stride 2) from the last input, before any
            projection (as the Swin authors' RepPoints v2 model).
        num_repeat (int): bidirectional passes.
        norm_cfg (dict): norm after every conv (GN 32 in that model).
        act_cfg (dict): activation after the 1x1 projections (None there;
            the fusions apply swish).
    """

    def __init__(self,
                 in_channels: List[int],
                 out_channels: int = 256,
                 num_outs: int = 5,
                 num_repeat: int = 2,
                 norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = dict(
                     type='Xavier', layer='Conv2d',
                     distribution='uniform')) -> None:
        super().__init__(init_cfg=init_cfg)
        if num_outs < len(in_channels):
            raise ValueError(f'BiFPN: num_outs={num_outs} is fewer than the '
                             f'{len(in_channels)} inputs (in_channels='
                             f'{list(in_channels)})')
        if num_repeat < 1:
            raise ValueError(f'BiFPN: num_repeat must be >= 1, got '
                             f'{num_repeat}')
        self.in_channels = list(in_channels)
        self.num_outs = num_outs
        first = self.in_channels + [self.in_channels[-1]] * (
            num_outs - len(in_channels))
        self.layers = nn.ModuleList(
            BiFPNLayer(first if i == 0 else [out_channels] * num_outs,
                       out_channels, norm_cfg, act_cfg)
            for i in range(num_repeat))

    def forward(self, inputs: Sequence[Tensor]) -> Tuple[Tensor, ...]:
        if len(inputs) != len(self.in_channels):
            raise ValueError(
                f'BiFPN expects {len(self.in_channels)} input levels '
                f'(in_channels={self.in_channels}), got {len(inputs)}')
        outs = list(inputs)
        while len(outs) < self.num_outs:
            outs.append(_down(outs[-1]))
        for layer in self.layers:
            outs = layer(outs)
        return tuple(outs)
