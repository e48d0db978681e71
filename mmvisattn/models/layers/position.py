"""Pixel-level position encoding: a learnable (H0*W0, C) table initialised
from 2D sinusoids (mmpretrain's ``build_2d_sincos_position_embedding``),
resized bicubically (mmpretrain's ``resize_pos_embed``) to any other map
size, so one set of weights serves every input resolution."""
from typing import Sequence, Tuple

import torch
import torch.nn as nn
from mmengine.model import BaseModule
from mmpretrain.models.utils import (build_2d_sincos_position_embedding,
                                     resize_pos_embed)


class PixelPositionEncoding(BaseModule):
    """``x + P`` on (B, H*W, C) tokens of an (H, W) map; ``P`` is learnable,
    starts as the sinusoids of ``size`` (H0, W0) and is resized to (H, W)
    when the map differs. ``embed_dims`` must be a multiple of 4 (two
    sine/cosine pairs per axis)."""

    def __init__(self, embed_dims: int, size: Sequence[int]):
        super().__init__()
        if embed_dims % 4:
            raise ValueError(f'PixelPositionEncoding: embed_dims '
                             f'{embed_dims} must be a multiple of 4')
        self.size = (int(size[0]), int(size[1]))
        self.table = nn.Parameter(torch.zeros(1, self.size[0] * self.size[1],
                                              embed_dims))

    def init_weights(self):
        with torch.no_grad():
            self.table.copy_(build_2d_sincos_position_embedding(
                self.size, self.table.shape[-1]))

    def forward(self, x: torch.Tensor,
                hw_shape: Tuple[int, int]) -> torch.Tensor:
        table = resize_pos_embed(self.table, self.size, hw_shape,
                                 num_extra_tokens=0)
        return x + table.to(x.dtype)
