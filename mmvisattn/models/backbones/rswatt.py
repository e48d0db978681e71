"""The RSWAtt family: a hierarchical backbone (Swin's 4-stage layout, 4x4
patch embedding and patch merging between stages, with reconstructed
sliding-window attention in every block instead of (shifted) windows, so
every pixel attends its own adaptive neighbourhood at every stage; the same
interface as :class:`SwinTransformer`) and a plain, single-scale ViT with
RSWAtt layers (the source's classification example)."""
from typing import Optional, Sequence

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmengine.model import ModuleList
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.models.layers import (
    PatchEmbed,
    PatchMerging,
    PixelPositionEncoding,
    RSWAttBlock,
)
from mmvisattn.registry import MODELS

from .base import (
    BackboneBase,
    BlockStage,
    HierarchicalBackbone,
    check_stages,
    resolve_arch,
)


@MODELS.register_module()
class RSWAttTransformer(HierarchicalBackbone):
    """RSWAtt backbone.

    Args:
        arch (str | dict): ``'tiny'`` (Swin-T scale: 96 channels, depths
            2/2/6/2, heads 3/6/12/24) or ``'nano'`` (64, 2/2/2/2, 2/4/8/16);
            or a dict with ``embed_dims, depths, num_heads``.
        scale_windows (int | sequence): the RSWAtt attention's windows, the
            largest of each scale (the multi-scale fusion runs all of them
            in every block of every stage).
        attn_cfg (dict): the attention of every block: its ``type`` (any
            registered RSWAtt attention, :class:`ReconstructedWindowAttention`
            by default) and options (``window_predictor``,
            ``reconstruction``, ``fusion``...).
        pixel_pos_embed (bool): add the learnable pixel-level position
            encoding (:class:`PixelPositionEncoding`, sinusoid-initialised
            for ``pretrain_img_size / patch_size`` and resized for other
            sizes) after the patch embedding. Off by default: the relative
            bias in every window already encodes position.
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
                 scale_windows: Sequence[int] = (5, 9),
                 mlp_ratio: float = 4.,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.1,
                 attn_cfg: Optional[dict] = None,
                 pixel_pos_embed: bool = False,
                 pretrain_img_size: int = 224,
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
        self.pos_embed = PixelPositionEncoding(
            dims, (pretrain_img_size // patch_size, ) * 2) \
            if pixel_pos_embed else None
        self.drop_after_pos = nn.Dropout(drop_rate)
        rates = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        stages = []
        for i, (depth, num_heads) in enumerate(zip(depths, heads)):
            start = sum(depths[:i])
            stages.append(BlockStage(
                [RSWAttBlock(num_features[i], num_heads, scale_windows,
                             mlp_ratio, drop_rate, attn_drop_rate,
                             rates[start + j], attn_cfg, norm_cfg,
                             with_cp=with_cp) for j in range(depth)],
                PatchMerging(num_features[i], norm_cfg=norm_cfg)
                if i < num_stages - 1 else None))
        self.build_skeleton('RSWAttTransformer', stages, num_features,
                            out_indices, frozen_stages, norm_eval, norm_cfg)
        self._freeze_stages()

    def frozen_parts(self):
        modules, params = super().frozen_parts()
        return modules + ([self.pos_embed] if self.pos_embed is not None
                          else []), params

    def embed_tokens(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.pos_embed is not None:
            x = self.pos_embed(x, hw_shape)
        return self.drop_after_pos(x)


@MODELS.register_module()
class RSWAttViT(BackboneBase):
    """A plain ViT whose layers are RSWAtt blocks: 16x16 patches, a class
    token, one map size throughout. Patch tokens attend their own adaptive
    windows at every scale of ``scale_windows``; the class token attends
    every token (:meth:`ReconstructedWindowAttention.attend_globally`),
    so the cost stays linear in the pixels.

    Args:
        arch (str | dict): ``'base-6'`` (the source's classification
            example: 768 channels, 6 layers, 12 heads), ``'tiny'`` (192,
            12, 3), ``'small'`` (384, 12, 6), ``'base'`` (768, 12, 12), or a
            dict with ``embed_dims, depth, num_heads``.
        img_size (int): the training size; the pixel position encoding is
            initialised for ``img_size // patch_size`` and resized for
            other inputs.
        scale_windows, attn_cfg: the RSWAtt layer's (defaults: the source's
            scales 4, 8, 16, its concatenation fusion and its offset
            predictor).
        pixel_pos_embed (bool): the learnable sinusoid-initialised pixel
            position encoding (:class:`PixelPositionEncoding`).
        out_type (str): ``'cls_token'`` (B, C), ``'avg_featmap'`` (B, C,
            the mean patch token) or ``'featmap'`` (B, C, H, W), after the
            final norm; returned as a 1-tuple, as mmpretrain's heads take.
        frozen_stages (int): freeze the embeddings and the first layers.
    """
    arch_zoo = {
        'base-6': dict(embed_dims=768, depth=6, num_heads=12),
        'tiny': dict(embed_dims=192, depth=12, num_heads=3),
        'small': dict(embed_dims=384, depth=12, num_heads=6),
        'base': dict(embed_dims=768, depth=12, num_heads=12),
    }
    OUT_TYPES = ('cls_token', 'avg_featmap', 'featmap')

    def __init__(self,
                 arch='base-6',
                 img_size: int = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 scale_windows: Sequence[int] = (4, 8, 16),
                 attn_cfg: Optional[dict] = dict(
                     fusion=dict(type='ConcatFusion'),
                     window_predictor=dict(type='OffsetExtents')),
                 pixel_pos_embed: bool = True,
                 mlp_ratio: float = 4.,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 out_type: str = 'cls_token',
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 norm_cfg: dict = dict(type='LN'),
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        arch = resolve_arch('RSWAttViT', self.arch_zoo, arch,
                            ('embed_dims', 'depth', 'num_heads'))
        if out_type not in self.OUT_TYPES:
            raise ValueError(f'RSWAttViT: out_type must be one of '
                             f'{self.OUT_TYPES}, got {out_type!r}')
        dims, depth = arch['embed_dims'], arch['depth']
        check_stages('RSWAttViT', depth, (), frozen_stages)
        self.embed_dims = dims
        self.out_type = out_type
        self.frozen_stages = frozen_stages
        self.out_channels = [dims]
        self.patch_embed = PatchEmbed(in_channels, dims, patch_size,
                                      norm_cfg=None)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dims))
        self.pos_embed = PixelPositionEncoding(
            dims, (img_size // patch_size, ) * 2) if pixel_pos_embed else None
        self.drop_after_pos = nn.Dropout(drop_rate)
        rates = torch.linspace(0, drop_path_rate, depth).tolist()
        self.layers = ModuleList(
            RSWAttBlock(dims, arch['num_heads'], scale_windows, mlp_ratio,
                        drop_rate, attn_drop_rate, rates[i], attn_cfg,
                        norm_cfg, with_cp=with_cp) for i in range(depth))
        self.ln1 = build_norm_layer(norm_cfg, dims)[1]
        self._freeze_stages()

    def frozen_parts(self):
        if self.frozen_stages < 0:
            return [], []
        modules = [self.patch_embed] + list(self.layers[:self.frozen_stages])
        if self.pos_embed is not None:
            modules.append(self.pos_embed)
        return modules, [self.cls_token]

    def init_tokens(self):
        trunc_normal_(self.cls_token, std=.02)

    def forward(self, x: torch.Tensor):
        x, hw_shape = self.patch_embed(x)
        if self.pos_embed is not None:
            x = self.pos_embed(x, hw_shape)
        x = self.drop_after_pos(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1).to(x.dtype),
                       x], 1)
        for block in self.layers:
            x = block(x, hw_shape)
        x = self.ln1(x)
        if self.out_type == 'cls_token':
            return (x[:, 0], )
        if self.out_type == 'avg_featmap':
            return (x[:, 1:].mean(1), )
        return (x[:, 1:].transpose(1, 2).reshape(x.shape[0], -1,
                                                  *hw_shape), )
