"""RSWAtt: reconstructed sliding-window attention, the plug-in module and its
transformer block.

Each query predicts the extents of its own window (left, right, top,
bottom, up to the scale's maximum window), directly or as a mixture of
anchor windows; the attention over those windows runs for several maximum
window sizes in parallel (multi-scale), fused per query by learned gates
and a linear projection. Every position attends its own sliding
neighbourhood, with a 2D relative position bias per scale
(:func:`mmvisattn.ops.reconstructed_window_attention`).
"""
import math
from typing import Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.ops import (reconstructed_window_attention,
                           reweighted_window_attention,
                           sliding_relative_index)
from mmvisattn.registry import MODELS
from .mlp import Mlp

PREDICTORS = ('direct', 'anchors')
RECONSTRUCTIONS = ('soft', 'mlp')
# anchor windows as fractions of the largest extents (left, right, top,
# bottom): full, small square, wide, tall
DEFAULT_ANCHORS = ((1., 1., 1., 1.), (.4, .4, .4, .4), (1., 1., .3, .3),
                   (.3, .3, 1., 1.))


@MODELS.register_module()
class ReconstructedWindowAttention(BaseModule):
    """RSWAtt on (B, H, W, C) maps.

    Args:
        embed_dims (int): channels C.
        num_heads (int): heads.
        window_sizes (sequence): the largest window of each scale, e.g.
            (5, 9); one scale is plain (single-scale) RSWAtt.
        temperature (float): softness of the predicted window borders.
        predictor (str): ``'direct'`` (sigmoid extents per side) or
            ``'anchors'`` (softmax mixture of ``anchors``).
        init_extent (float): the starting window, as a fraction of the
            largest (the predictor's bias).
        qkv_bias (bool): bias of the qkv projection.
        reconstruct (str): ``'soft'`` (default: predicted soft windows) or
            ``'mlp'``, the paper's module: a conv-based qkv (1x1 then 3x3
            depthwise), cosine attention with a learned temperature per
            head over the whole largest window, its weights re-weighted by
            an MLP over the window positions (``R = A + MLP(A)``, the MLP's
            last layer starting at zero); no window predictor.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 window_sizes: Sequence[int] = (5, 9),
                 temperature: float = 0.5,
                 predictor: str = 'direct',
                 anchors: Sequence[Sequence[float]] = DEFAULT_ANCHORS,
                 init_extent: float = 0.75,
                 qkv_bias: bool = True,
                 reconstruct: str = 'soft',
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                             f'num_heads {num_heads}')
        if predictor not in PREDICTORS:
            raise ValueError(f'predictor must be one of {PREDICTORS}, got '
                             f'{predictor!r}')
        if reconstruct not in RECONSTRUCTIONS:
            raise ValueError(f'reconstruct must be one of {RECONSTRUCTIONS}, '
                             f'got {reconstruct!r}')
        if not window_sizes or min(window_sizes) < 1:
            raise ValueError(f'window_sizes must be positive, got '
                             f'{window_sizes}')
        self.num_heads = num_heads
        self.window_sizes = tuple(int(m) for m in window_sizes)
        self.temperature = temperature
        self.predictor = predictor
        self.init_extent = init_extent
        self.reconstruct = reconstruct
        scales = len(self.window_sizes)
        if reconstruct == 'mlp':
            self.qkv = nn.Sequential(
                nn.Conv2d(embed_dims, embed_dims * 3, 1, bias=qkv_bias),
                nn.Conv2d(embed_dims * 3, embed_dims * 3, 3, padding=1,
                          groups=embed_dims * 3))
            self.logit_scale = nn.Parameter(
                torch.full((num_heads, ), math.log(10.)))
            self.reweight = nn.ModuleList(
                nn.Sequential(nn.Linear(m * m, m * m), nn.GELU(),
                              nn.Linear(m * m, m * m))
                for m in self.window_sizes)
            self.window_pred = None
        else:
            self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
            # window reconstruction: per query and scale, 4 extents (direct)
            # or the weights of each anchor window
            per_scale = 4 if predictor == 'direct' else len(anchors)
            self.window_pred = nn.Linear(embed_dims, per_scale * scales)
        if predictor == 'anchors' and reconstruct == 'soft':
            self.register_buffer('anchors', torch.tensor(anchors).float(),
                                 persistent=False)
        # multi-scale fusion: a gate per scale and query, then a projection
        self.scale_gate = nn.Linear(embed_dims, scales) if scales > 1 \
            else None
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.attn_drop = attn_drop
        # analysis tools set this to keep the last predicted extents
        self.record_extents = False
        self.last_extents = None
        self.relative_position_bias_tables = nn.ParameterList(
            nn.Parameter(torch.zeros((2 * m - 1)**2, num_heads))
            for m in self.window_sizes)
        for m in self.window_sizes:
            self.register_buffer(f'relative_index_{m}',
                                 sliding_relative_index(m).clone(),
                                 persistent=False)
        # (scales, 4): left, right, top, bottom of each full M x M window
        self.register_buffer(
            'extent_limits',
            torch.stack([self.max_extents(m) for m in self.window_sizes]),
            persistent=False)

    def init_weights(self):
        super().init_weights()
        for table in self.relative_position_bias_tables:
            trunc_normal_(table, std=.02)
        if self.reconstruct == 'mlp':
            for mlp in self.reweight:  # start as plain window attention
                nn.init.zeros_(mlp[-1].weight)
                nn.init.zeros_(mlp[-1].bias)
            return
        nn.init.zeros_(self.window_pred.weight)
        if self.predictor == 'direct':
            nn.init.constant_(self.window_pred.bias,
                              math.log(self.init_extent /
                                       (1 - self.init_extent)))
        else:
            nn.init.zeros_(self.window_pred.bias)

    @staticmethod
    def max_extents(m: int) -> torch.Tensor:
        """(left, right, top, bottom) of the full m x m neighbourhood."""
        before, after = m // 2, m - 1 - m // 2
        return torch.tensor([before, after, before, after],
                            dtype=torch.float)

    def predict_extents(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, W, C) -> (B, H, W, scales, 4) window extents in pixels."""
        B, H, W, _ = x.shape
        raw = self.window_pred(x).view(B, H, W, len(self.window_sizes), -1)
        if self.predictor == 'direct':
            fractions = raw.sigmoid()
        else:
            fractions = raw.softmax(-1) @ self.anchors.to(raw.dtype)
        return fractions * self.extent_limits.to(raw.dtype)

    def forward(self, x: torch.Tensor,
                return_extents: bool = False) -> torch.Tensor:
        """``x`` (B, H, W, C) -> (B, H, W, C) (and the extents)."""
        B, H, W, C = x.shape
        heads = self.num_heads
        if self.reconstruct == 'mlp':
            qkv = self.qkv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
            extents = None
        else:
            qkv = self.qkv(x)
            extents = self.predict_extents(x)
        q, k, v = qkv.reshape(B, H, W, 3, heads, C // heads).permute(
            3, 0, 4, 1, 2, 5).unbind(0)  # (B, heads, H, W, d)
        outs = []
        for s, m in enumerate(self.window_sizes):
            table = self.relative_position_bias_tables[s]
            bias = table[getattr(self, f'relative_index_{m}')].t()
            if self.reconstruct == 'mlp':
                out = reweighted_window_attention(
                    q, k, v, m, self.logit_scale.exp().clamp(max=100.),
                    self.reweight[s], bias)
            else:
                out = reconstructed_window_attention(
                    q, k, v, m, extents[..., s, :], self.temperature, bias)
            outs.append(out.permute(0, 2, 3, 1, 4).reshape(B, H, W, C))
        if self.scale_gate is None:
            fused = outs[0]
        else:
            gates = self.scale_gate(x).softmax(-1)  # (B, H, W, scales)
            fused = sum(g[..., None] * o
                        for g, o in zip(gates.unbind(-1), outs))
        out = self.proj_drop(self.proj(F.dropout(fused, self.attn_drop,
                                                 self.training)))
        if self.record_extents and extents is not None:
            self.last_extents = extents.detach()
        return (out, extents) if return_extents else out


class RSWAttBlock(BaseModule):
    """Pre-norm block: ``x + DropPath(RSWAtt(LN(x)))``, then
    ``x + DropPath(MLP(LN(x)))``; tokens (B, H*W, C) with their map size.
    ``attn_cfg`` may name a registered subclass of
    :class:`ReconstructedWindowAttention` as ``type``."""

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 window_sizes: Sequence[int] = (5, 9),
                 mlp_ratio: float = 4.,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 attn_cfg: Optional[dict] = None,
                 norm_cfg: dict = dict(type='LN'),
                 with_cp: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.with_cp = with_cp
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        attn_cfg = dict(attn_cfg or {})
        attn_type = attn_cfg.pop('type', 'ReconstructedWindowAttention')
        attn_cls = MODELS.get(attn_type)
        if attn_cls is None or not issubclass(attn_cls,
                                              ReconstructedWindowAttention):
            raise ValueError(f'attn_cfg: type={attn_type!r} is not an RSWAtt '
                             'attention (ReconstructedWindowAttention)')
        self.attn = attn_cls(
            embed_dims, num_heads, window_sizes, attn_drop=attn_drop_rate,
            proj_drop=drop_rate, **attn_cfg)
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        # mmcv FFN's default activation, which this block always had
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio),
                       dict(type='ReLU', inplace=True), drop_rate)
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))

    def _forward(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        B, L, C = x.shape
        attn = self.attn(self.norm1(x).view(B, *hw_shape, C))
        x = x + self.drop_path(attn.reshape(B, L, C))
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def forward(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, hw_shape,
                                 use_reentrant=False)
        return self._forward(x, hw_shape)
