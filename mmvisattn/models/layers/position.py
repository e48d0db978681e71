"""Pixel-level position encoding: a learnable (H0*W0, C) table initialised
from 2D sinusoids, resized bicubically to any other map size, so one set of
weights serves every input resolution.

The two helpers reproduce mmpretrain's ``build_2d_sincos_position_embedding``
and ``resize_pos_embed`` operation for operation (bitwise the same tables;
``tests/test_light_import.py`` compares them where mmpretrain is installed),
so building a backbone does not need mmpretrain."""
from typing import Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule

from mmvisattn.ops.symbolic import is_concrete


def sincos_2d_table(size: Sequence[int], embed_dims: int,
                    temperature: float = 10000.) -> torch.Tensor:
    """(1, H*W, C) sinusoids of an (H, W) map, as mmpretrain's
    ``build_2d_sincos_position_embedding(size, embed_dims)``: per channel
    quarter sin/cos of the x, then of the y coordinate, tokens ordered as
    its ``meshgrid(arange(W), arange(H), indexing='ij')`` orders them."""
    h, w = size
    grid_w, grid_h = torch.meshgrid(torch.arange(w, dtype=torch.float32),
                                    torch.arange(h, dtype=torch.float32),
                                    indexing='ij')
    if embed_dims % 4:
        raise ValueError(f'embed_dims {embed_dims} must be a multiple of 4')
    pos_dim = embed_dims // 4
    omega = torch.arange(pos_dim, dtype=torch.float32) / pos_dim
    omega = 1. / (temperature**omega)
    out_w = torch.einsum('m,d->md', [grid_w.flatten(), omega])
    out_h = torch.einsum('m,d->md', [grid_h.flatten(), omega])
    return torch.cat([torch.sin(out_w), torch.cos(out_w),
                      torch.sin(out_h), torch.cos(out_h)], dim=1)[None]


def resize_table(table: torch.Tensor, src_shape: Sequence[int],
                 dst_shape: Sequence[int]) -> torch.Tensor:
    """(1, H0*W0, C) -> (1, H*W, C), bicubic in fp32 and back to the
    table's dtype, as mmpretrain's ``resize_pos_embed(...,
    num_extra_tokens=0)``; the table itself when the shapes agree."""
    # traced sizes (mmvisattn.ops.symbolic): always resize (bicubic to the
    # same grid is the identity), never decide in Python
    if is_concrete(*dst_shape) and src_shape[0] == dst_shape[0] and \
            src_shape[1] == dst_shape[1]:
        return table
    _, length, channels = table.shape
    if length != src_shape[0] * src_shape[1]:
        raise ValueError(f'position table of {length} tokens does not match '
                         f'the map {tuple(src_shape)}')
    src = table.reshape(1, src_shape[0], src_shape[1],
                        channels).permute(0, 3, 1, 2)
    dst = F.interpolate(src.float(), size=tuple(dst_shape),
                        align_corners=False, mode='bicubic')
    # mmpretrain concatenates its (here empty) extra tokens in front
    return torch.cat((table[:, :0], torch.flatten(dst, 2).transpose(
        1, 2).to(src.dtype)), dim=1)


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
            self.table.copy_(sincos_2d_table(self.size, self.table.shape[-1]))

    def forward(self, x: torch.Tensor,
                hw_shape: Tuple[int, int]) -> torch.Tensor:
        table = resize_table(self.table, self.size, hw_shape)
        return x + table.to(x.dtype)
