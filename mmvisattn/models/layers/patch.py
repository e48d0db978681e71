"""Patch embedding and patch merging in the official Swin weight layout.

mmcv's ``PatchMerging`` concatenates the 2x2 neighbourhood in ``nn.Unfold``
order, which scrambles released ``downsample.reduction`` weights; these keep
the official order (and key names ``proj``/``norm``/``reduction``) so released
checkpoints load without reordering.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule

from mmvisattn.ops.symbolic import is_concrete

from .linear import PackedLinear


def check_images(x: torch.Tensor, in_channels: int, owner: str) -> None:
    """Refuse what would otherwise fail deep inside a kernel: a wrong rank or
    channel count, or an empty batch (shape checks, free on any device).

    NaN/Inf pixels are checked where that costs no device sync:
    ``mmvisattn.FiniteInputHook`` checks each batch on the host, before the
    data preprocessor moves it, and the preprocessor's std once. In the
    forward the value check runs only under PyTorch's own debug switch,
    ``torch.autograd.set_detect_anomaly(True)``, since reading a GPU
    tensor's values in Python stalls the stream on every forward."""
    if x.dim() != 4 or x.shape[1] != in_channels:
        raise ValueError(
            f'{owner} expects images of shape (N, {in_channels}, H, W) '
            f'(in_channels={in_channels}), got {tuple(x.shape)}')
    if x.numel() == 0:
        raise ValueError(f'{owner} got an empty batch {tuple(x.shape)}')
    # data-dependent: skipped inside torch.compile graphs
    if (not torch.compiler.is_compiling() and torch.is_anomaly_enabled()
            and not torch.isfinite(x).all()):
        raise ValueError(
            f'{owner} got NaN/Inf pixel values (shape {tuple(x.shape)}); '
            'check the image files and the data preprocessor mean/std')


class PatchEmbed(BaseModule):
    """Non-overlapping patch partition + linear embedding (a strided conv).

    Input (B, C, H, W) is zero-padded at the bottom/right to a multiple of
    ``patch_size``. Returns tokens (B, H'*W', embed_dims) and (H', W').
    """

    def __init__(self,
                 in_channels: int = 3,
                 embed_dims: int = 96,
                 patch_size: int = 4,
                 norm_cfg: Optional[dict] = dict(type='LN'),
                 init_cfg=None):
        super().__init__(init_cfg)
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.proj = nn.Conv2d(
            in_channels, embed_dims, kernel_size=patch_size, stride=patch_size)
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1] \
            if norm_cfg else None

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int]]:
        check_images(x, self.in_channels, self.__class__.__name__)
        H, W = x.shape[2:]
        p = self.patch_size
        # traced sizes (mmvisattn.ops.symbolic): always pad, maybe by 0
        if not is_concrete(H, W) or H % p or W % p:
            x = F.pad(x, (0, (p - W % p) % p, 0, (p - H % p) % p))
        x = self.proj(x)
        hw_shape = (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)
        if self.norm is not None:
            x = self.norm(x)
        return x, hw_shape


class PatchMerging(BaseModule):
    """Concatenate each 2x2 neighbourhood (4C), normalise, project to 2C.

    Odd feature sizes are zero-padded at the bottom/right first. Subclasses
    with ``norm_channels = 'out'`` normalise the projection's output instead
    (Swin V2's order).
    """

    norm_channels = 'in'  # the norm's width: 4C ('in') or out_channels

    def __init__(self,
                 in_channels: int,
                 out_channels: Optional[int] = None,
                 norm_cfg: Optional[dict] = dict(type='LN'),
                 init_cfg=None):
        super().__init__(init_cfg)
        self.in_channels = in_channels
        self.out_channels = out_channels or 2 * in_channels
        norm_width = 4 * in_channels if self.norm_channels == 'in' \
            else self.out_channels
        self.norm = build_norm_layer(norm_cfg, norm_width)[1] \
            if norm_cfg else None
        self.reduction = PackedLinear(
            4 * in_channels, self.out_channels, bias=False)

    def merge(self, x: torch.Tensor, hw_shape: Tuple[int, int]
              ) -> Tuple[torch.Tensor, Tuple[int, int]]:
        """(B, H*W, C) -> (B, H/2*W/2, 4C), each 2x2 neighbourhood
        concatenated in the official order."""
        B, L, C = x.shape
        H, W = hw_shape
        if is_concrete(L, H, W) and L != H * W:
            raise ValueError(f'{type(self).__name__}: {L} tokens do not '
                             f'form a {H}x{W} map')
        x = x.view(B, H, W, C)
        if not is_concrete(H, W) or H % 2 or W % 2:
            x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
        # Official order: (even row, even col), (odd, even), (even, odd), (odd, odd).
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2],
                       x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return x.view(B, -1, 4 * C), (x.shape[1], x.shape[2])

    def forward(self, x: torch.Tensor, hw_shape: Tuple[int, int]
                ) -> Tuple[torch.Tensor, Tuple[int, int]]:
        x, hw_shape = self.merge(x, hw_shape)
        if self.norm is not None:
            x = self.norm(x)
        return self.reduction(x), hw_shape
