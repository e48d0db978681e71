"""A hierarchical RSWAtt backbone: Swin's 4-stage layout (4x4 patch
embedding, patch merging between stages) with reconstructed sliding-window
attention in every block instead of (shifted) windows, so every pixel
attends its own adaptive neighbourhood at every stage, the highest
resolution included. Same interface as :class:`SwinTransformer`."""
from typing import Optional, Sequence

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.models.layers import PatchEmbed, PatchMerging, RSWAttBlock
from mmvisattn.registry import MODELS
from .base import check_stages, resolve_arch


@MODELS.register_module()
class RSWAttTransformer(BaseModule):
    """RSWAtt backbone.

    Args:
        arch (str | dict): ``'tiny'`` (Swin-T scale: 96 channels, depths
            2/2/6/2, heads 3/6/12/24) or ``'nano'`` (64, 2/2/2/2, 2/4/8/16);
            or a dict with ``embed_dims, depths, num_heads``.
        window_sizes (sequence): the largest window of each scale (the
            multi-scale fusion runs all of them in every block).
        attn_cfg (dict): more :class:`ReconstructedWindowAttention` options
            (``temperature``, ``predictor``, ``init_extent``...).
        out_indices, frozen_stages, with_cp, drop_path_rate: as Swin's.
    """
    arch_zoo = {
        'tiny': dict(embed_dims=96, depths=(2, 2, 6, 2),
                     num_heads=(3, 6, 12, 24)),
        'nano': dict(embed_dims=64, depths=(2, 2, 2, 2),
                     num_heads=(2, 4, 8, 16)),
    }

    def __init__(self,
                 arch: str = 'tiny',
                 in_channels: int = 3,
                 patch_size: int = 4,
                 window_sizes: Sequence[int] = (5, 9),
                 mlp_ratio: float = 4.,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.1,
                 attn_cfg: Optional[dict] = None,
                 out_indices: Sequence[int] = (0, 1, 2, 3),
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 norm_cfg: dict = dict(type='LN'),
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        arch = resolve_arch('RSWAttTransformer', self.arch_zoo, arch,
                            ('embed_dims', 'depths', 'num_heads'))
        dims, depths, heads = (arch['embed_dims'], tuple(arch['depths']),
                               tuple(arch['num_heads']))
        if len(depths) != len(heads):
            raise ValueError(f'depths {depths} and num_heads {heads} differ '
                             'in length')
        num_stages = len(depths)
        self.out_indices = tuple(out_indices)
        check_stages('RSWAttTransformer', num_stages, self.out_indices,
                     frozen_stages)
        self.frozen_stages = frozen_stages
        self.with_cp = with_cp
        self.num_features = [dims * 2**i for i in range(num_stages)]
        self.patch_embed = PatchEmbed(in_channels, dims, patch_size,
                                      norm_cfg)
        self.drop_after_pos = nn.Dropout(drop_rate)
        rates = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        self.stages = ModuleList()
        self.downsamples = ModuleList()
        for i, (depth, num_heads) in enumerate(zip(depths, heads)):
            start = sum(depths[:i])
            self.stages.append(ModuleList(
                RSWAttBlock(self.num_features[i], num_heads, window_sizes,
                            mlp_ratio, drop_rate, attn_drop_rate,
                            rates[start + j], attn_cfg, norm_cfg)
                for j in range(depth)))
            self.downsamples.append(
                PatchMerging(self.num_features[i], norm_cfg=norm_cfg)
                if i < num_stages - 1 else nn.Identity())
        for i in self.out_indices:
            self.add_module(f'norm{i}',
                            build_norm_layer(norm_cfg,
                                             self.num_features[i])[1])

    def init_weights(self):
        if self.init_cfg is not None:
            super().init_weights()
            return
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for stage in self.stages:
            for block in stage:
                block.attn.init_weights()  # relative tables, predictor

    def forward(self, x: torch.Tensor):
        x, hw = self.patch_embed(x)
        x = self.drop_after_pos(x)
        outs = []
        for i, (stage, down) in enumerate(zip(self.stages,
                                              self.downsamples)):
            for block in stage:
                if self.with_cp and self.training and x.requires_grad:
                    x = cp.checkpoint(block, x, hw, use_reentrant=False)
                else:
                    x = block(x, hw)
            if i in self.out_indices:
                out = getattr(self, f'norm{i}')(x)
                outs.append(out.view(-1, *hw, self.num_features[i]).permute(
                    0, 3, 1, 2).contiguous())
            if not isinstance(down, nn.Identity):
                x, hw = down(x, hw)
        return tuple(outs)

    def _freeze(self):
        if self.frozen_stages < 0:
            return
        frozen = [self.patch_embed] + [
            m for i in range(self.frozen_stages)
            for m in (self.stages[i], self.downsamples[i])
        ]
        for module in frozen:
            module.eval()
            for p in module.parameters():
                p.requires_grad = False

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze()
        return self
