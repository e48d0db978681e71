"""A hierarchical RSWAtt backbone: Swin's 4-stage layout (4x4 patch
embedding, patch merging between stages) with reconstructed sliding-window
attention in every block instead of (shifted) windows, so every pixel
attends its own adaptive neighbourhood at every stage, the highest
resolution included. Same interface as :class:`SwinTransformer`."""
from typing import Optional, Sequence

import torch
import torch.nn as nn

from mmvisattn.models.layers import PatchEmbed, PatchMerging, RSWAttBlock
from mmvisattn.registry import MODELS
from .base import BlockStage, HierarchicalBackbone, resolve_arch


@MODELS.register_module()
class RSWAttTransformer(HierarchicalBackbone):
    """RSWAtt backbone.

    Args:
        arch (str | dict): ``'tiny'`` (Swin-T scale: 96 channels, depths
            2/2/6/2, heads 3/6/12/24) or ``'nano'`` (64, 2/2/2/2, 2/4/8/16);
            or a dict with ``embed_dims, depths, num_heads``.
        window_sizes (sequence): the largest window of each scale (the
            multi-scale fusion runs all of them in every block).
        attn_cfg (dict): more :class:`ReconstructedWindowAttention` options
            (``temperature``, ``predictor``, ``init_extent``...).
        out_indices, frozen_stages, norm_eval, with_cp, drop_path_rate: as
            Swin's (the same skeleton, :class:`HierarchicalBackbone`).
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
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 norm_cfg: dict = dict(type='LN'),
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        arch = resolve_arch('RSWAttTransformer', self.arch_zoo, arch,
                            ('embed_dims', 'depths', 'num_heads'))
        dims, depths, heads = (arch['embed_dims'], tuple(arch['depths']),
                               tuple(arch['num_heads']))
        if len(depths) != len(heads):
            raise ValueError(f'RSWAttTransformer: depths {depths} and '
                             f'num_heads {heads} must have the same length')
        num_stages = len(depths)
        num_features = [dims * 2**i for i in range(num_stages)]
        self.patch_embed = PatchEmbed(in_channels, dims, patch_size,
                                      norm_cfg)
        self.drop_after_pos = nn.Dropout(drop_rate)
        rates = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        stages = []
        for i, (depth, num_heads) in enumerate(zip(depths, heads)):
            start = sum(depths[:i])
            stages.append(BlockStage(
                [RSWAttBlock(num_features[i], num_heads, window_sizes,
                             mlp_ratio, drop_rate, attn_drop_rate,
                             rates[start + j], attn_cfg, norm_cfg,
                             with_cp=with_cp) for j in range(depth)],
                PatchMerging(num_features[i], norm_cfg=norm_cfg)
                if i < num_stages - 1 else None))
        self.build_skeleton('RSWAttTransformer', stages, num_features,
                            out_indices, frozen_stages, norm_eval, norm_cfg)
        self._freeze_stages()
        self._register_load_state_dict_pre_hook(self._old_stage_layout)

    @staticmethod
    def _old_stage_layout(state_dict, prefix, *args, **kwargs):
        """Checkpoints saved before the shared skeleton have
        ``stages.{i}.{j}.*`` and ``downsamples.{i}.*``; they are now
        ``layers.{i}.blocks.{j}.*`` and ``layers.{i}.downsample.*``."""
        for key in [k for k in state_dict if k.startswith(
                (prefix + 'stages.', prefix + 'downsamples.'))]:
            rest = key[len(prefix):].split('.')
            if rest[0] == 'stages':
                new = ['layers', rest[1], 'blocks', *rest[2:]]
            else:
                new = ['layers', rest[1], 'downsample', *rest[2:]]
            state_dict[prefix + '.'.join(new)] = state_dict.pop(key)

    def init_from_scratch(self):
        self.init_transformer(self)
        for stage in self.layers:
            for block in stage.blocks:
                block.attn.init_weights()  # relative tables, predictor

    def embed_tokens(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        return self.drop_after_pos(x)
