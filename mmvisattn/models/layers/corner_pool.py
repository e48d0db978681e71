"""Corner pooling block of CornerNet, as RepPoints v2 uses it for corner
verification. mmcv's ``CornerPool`` is a compiled op: it is imported when a
block is built, so ``import mmvisattn`` works with mmcv-lite."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import ConvModule

from mmvisattn.utils.optional import import_mmcv_ops

# which two directional max-pools make each corner: a top-left corner is
# where the maximum looking right and down (top / left pools) peaks
CORNER_POOLS = {'top_left': ('top', 'left'), 'bottom_right': ('bottom', 'right')}


class CornerPoolBlock(nn.Module):
    """Two directional corner pools over reduced features, summed, projected
    back and added to a 1x1 shortcut (CornerNet's corner pooling module).

    Args:
        channels (int): input and output channels.
        corner (str): ``'top_left'`` or ``'bottom_right'``.
        corner_channels (int): channels of the pooled branches.
        first_kernel_size (int): kernel of the convs before pooling.
        kernel_size (int): kernel of the output conv.
        norm_cfg (dict): norm after every conv (GN 32 in RepPoints v2).
    """

    def __init__(self,
                 channels: int,
                 corner: str,
                 corner_channels: int = 64,
                 first_kernel_size: int = 3,
                 kernel_size: int = 1,
                 conv_cfg: Optional[dict] = None,
                 norm_cfg: Optional[dict] = dict(
                     type='GN', num_groups=32, requires_grad=True)):
        super().__init__()
        if corner not in CORNER_POOLS:
            raise ValueError(f'corner must be one of {sorted(CORNER_POOLS)}, '
                             f'got {corner!r}')
        self.corner = corner
        conv = dict(conv_cfg=conv_cfg, norm_cfg=norm_cfg)
        CornerPool = import_mmcv_ops('CornerPoolBlock').CornerPool
        self.pools = nn.ModuleList(CornerPool(d) for d in CORNER_POOLS[corner])
        self.reduce_convs = nn.ModuleList(
            ConvModule(channels, corner_channels, first_kernel_size,
                       padding=first_kernel_size // 2, **conv)
            for _ in self.pools)
        self.pooled_proj = ConvModule(
            corner_channels, channels, 3, padding=1, act_cfg=None, **conv)
        self.shortcut = ConvModule(channels, channels, 1, act_cfg=None, **conv)
        self.relu = nn.ReLU(inplace=True)
        self.out_conv = ConvModule(
            channels, channels, kernel_size, padding=kernel_size // 2, **conv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = sum(
            pool(reduce(x))
            for pool, reduce in zip(self.pools, self.reduce_convs))
        return self.out_conv(
            self.relu(self.pooled_proj(pooled) + self.shortcut(x)))
