"""RSWAtt: reconstructed sliding-window attention, the plug-in module and its
transformer block.

Each query predicts the extents of its own window (left, right, top,
bottom, up to the scale's maximum window), directly, as offsets from an
MLP, or as a mixture of anchor windows; the attention over those windows
runs for several maximum window sizes in parallel (multi-scale), fused per
query by learned gates (``fusion='gate'``) or by the source's sigmoid
weight per scale, concatenation and a linear layer (``fusion='concat'``).
Every position attends its own sliding neighbourhood, with a 2D relative
position bias per scale
(:func:`mmvisattn.ops.reconstructed_window_attention`); ``adaptive=False``
is the same layer with fixed full windows (plain sliding-window attention,
:func:`mmvisattn.ops.sliding_window_attention_blocked`), the baseline every
adaptive variant is measured against.
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

from mmvisattn.ops import (attend, reconstructed_window_attention,
                           reweighted_window_attention,
                           sliding_relative_index,
                           sliding_window_attention_blocked)
from mmvisattn.registry import MODELS
from .mlp import Mlp

PREDICTORS = ('direct', 'offsets', 'anchors', 'enhanced_anchors')
RECONSTRUCTIONS = ('soft', 'mlp')
FUSIONS = ('gate', 'concat')
# anchor windows as fractions of the largest extents (left, right, top,
# bottom): full, small square, wide, tall
DEFAULT_ANCHORS = ((1., 1., 1., 1.), (.4, .4, .4, .4), (1., 1., .3, .3),
                   (.3, .3, 1., 1.))
# the enhanced reconstructor's 8 anchors: three squares, two wide, two tall
# and one off-centre pair covering each half
ENHANCED_ANCHORS = ((1., 1., 1., 1.), (.6, .6, .6, .6), (.3, .3, .3, .3),
                    (1., 1., .4, .4), (.6, .6, .2, .2), (.4, .4, 1., 1.),
                    (.2, .2, .6, .6), (1., 0., 1., 0.))


@MODELS.register_module()
class ReconstructedWindowAttention(BaseModule):
    """RSWAtt on (B, H, W, C) maps.

    Args:
        embed_dims (int): channels C.
        num_heads (int): heads.
        window_sizes (sequence): the largest window of each scale, e.g.
            (5, 9); one scale is plain (single-scale) RSWAtt.
        temperature (float): softness of the predicted window borders.
        predictor (str): ``'direct'`` (a linear layer, sigmoid extents per
            side, our default); ``'offsets'`` (the source's form:
            Linear-ReLU-Linear to four offsets around the query, the
            reference point, in units of the largest window of all scales,
            clamped to the scale's window); ``'anchors'`` (softmax mixture
            of ``anchors``, 4 fixed windows by default); or
            ``'enhanced_anchors'`` (the source's enhanced reconstructor:
            ``anchors``, 8 windows by default, each rescaled per pixel by
            its own predicted parameters, then mixed).
        anchors (sequence): anchor windows (left, right, top, bottom as
            fractions of the largest); None: DEFAULT_ANCHORS for
            ``'anchors'``, ENHANCED_ANCHORS for ``'enhanced_anchors'``.
        init_extent (float): the starting window, as a fraction of the
            largest (the predictor's bias).
        predictor_gain (float): the linear predictors' outputs are
            multiplied by it before the sigmoid / softmax. AdamW moves each
            weight by about the learning rate per step whatever the
            gradient's size, so at gain 1 the windows of a 200-iteration
            run (lr 2e-4) moved by hundredths of M; 10 lets them spread
            (docs/backbones.md#learned-windows). Equivalent to a 10x
            learning rate on the predictor, without a config entry. Not
            applied to ``'offsets'``, which keeps the source's scaling by
            the largest window.
        adaptive (bool): False keeps every window at its full M x M (no
            predictor): plain sliding-window attention per scale.
        fusion (str): how scales combine: ``'gate'`` (a softmax gate per
            query, our default) or ``'concat'`` (the source's: a learned
            sigmoid weight per scale, concatenation, and one linear layer
            from scales * C to C as the output projection).
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
                 anchors: Optional[Sequence[Sequence[float]]] = None,
                 init_extent: float = 0.75,
                 predictor_gain: float = 10.,
                 qkv_bias: bool = True,
                 reconstruct: str = 'soft',
                 adaptive: bool = True,
                 fusion: str = 'gate',
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
        if fusion not in FUSIONS:
            raise ValueError(f'fusion must be one of {FUSIONS}, got '
                             f'{fusion!r}')
        if not window_sizes or min(window_sizes) < 1:
            raise ValueError(f'window_sizes must be positive, got '
                             f'{window_sizes}')
        self.num_heads = num_heads
        self.window_sizes = tuple(int(m) for m in window_sizes)
        self.temperature = temperature
        self.predictor = predictor
        self.init_extent = init_extent
        self.predictor_gain = predictor_gain
        self.reconstruct = reconstruct
        # the mlp reconstruction always attends the whole window
        self.adaptive = adaptive and reconstruct == 'soft'
        self.fusion = fusion
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
            self.window_pred = self._build_predictor(
                embed_dims, scales, anchors) if self.adaptive else None
        # multi-scale fusion: a gate per scale and query, or a weight per
        # scale and concatenation; then the output projection
        self.scale_gate = nn.Linear(embed_dims, scales) \
            if fusion == 'gate' and scales > 1 else None
        self.scale_weights = nn.Parameter(torch.zeros(scales)) \
            if fusion == 'concat' else None
        proj_in = embed_dims * scales if fusion == 'concat' else embed_dims
        self.proj = nn.Linear(proj_in, embed_dims)
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

    def _build_predictor(self, embed_dims: int, scales: int,
                         anchors) -> nn.Module:
        """Per query and scale: 4 extents ('direct', 'offsets'), the weight
        of each anchor ('anchors'), or per anchor its weight and 4 scales
        ('enhanced_anchors')."""
        if self.predictor in ('anchors', 'enhanced_anchors'):
            if anchors is None:
                anchors = DEFAULT_ANCHORS if self.predictor == 'anchors' \
                    else ENHANCED_ANCHORS
            self.register_buffer('anchors', torch.tensor(anchors).float(),
                                 persistent=False)
        if self.predictor == 'offsets':
            hidden = max(16, embed_dims // 4)
            return nn.Sequential(nn.Linear(embed_dims, hidden),
                                 nn.ReLU(inplace=True),
                                 nn.Linear(hidden, 4 * scales))
        if self.predictor == 'direct':
            per_scale = 4
        elif self.predictor == 'anchors':
            per_scale = len(self.anchors)
        else:
            per_scale = 5 * len(self.anchors)
        return nn.Linear(embed_dims, per_scale * scales)

    def init_weights(self):
        super().init_weights()
        for table in self.relative_position_bias_tables:
            trunc_normal_(table, std=.02)
        if self.reconstruct == 'mlp':
            for mlp in self.reweight:  # start as plain window attention
                nn.init.zeros_(mlp[-1].weight)
                nn.init.zeros_(mlp[-1].bias)
            return
        if self.window_pred is None:
            return
        # every query starts at the same window: init_extent of the largest
        # ('direct', 'offsets') or the uniform anchor mixture
        last = self.window_pred[-1] if isinstance(
            self.window_pred, nn.Sequential) else self.window_pred
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        if self.predictor == 'direct':
            nn.init.constant_(last.bias, math.log(
                self.init_extent /
                (1 - self.init_extent)) / self.predictor_gain)

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
        limits = self.extent_limits.to(raw.dtype)
        if self.predictor == 'offsets':
            # offsets around the reference window (init_extent of the
            # scale's), in units of the largest window of all scales
            largest = max(self.window_sizes)
            extents = self.init_extent * limits + raw * largest
            return torch.minimum(extents.clamp(min=0), limits)
        raw = raw * self.predictor_gain
        if self.predictor == 'direct':
            fractions = raw.sigmoid()
        elif self.predictor == 'anchors':
            fractions = raw.softmax(-1) @ self.anchors.to(raw.dtype)
        else:  # enhanced: per anchor a weight and 4 per-pixel scales
            num = len(self.anchors)
            weights, scales = raw.split([num, 4 * num], -1)
            scales = scales.unflatten(-1, (num, 4))
            # 2 * sigmoid: 1 at the start, so each anchor starts as itself
            anchors = (self.anchors.to(raw.dtype) * 2 *
                       scales.sigmoid()).clamp(max=1)
            fractions = (weights.softmax(-1)[..., None] * anchors).sum(-2)
        return fractions * limits

    def forward(self, x: torch.Tensor, return_extents: bool = False,
                global_tokens: Optional[torch.Tensor] = None):
        """``x`` (B, H, W, C) -> (B, H, W, C) (and the extents).

        ``global_tokens`` (B, n, C), e.g. a ViT's class token, attend every
        pixel and each other with the same projections (their window is the
        whole image; pixels do not attend them): ``(out, global_out)`` is
        returned then, extents last when asked for."""
        B, H, W, C = x.shape
        heads = self.num_heads
        if global_tokens is not None and self.reconstruct != 'soft':
            raise ValueError("global tokens need reconstruct='soft' (the "
                             'mlp reconstruction has a convolutional qkv)')
        if self.reconstruct == 'mlp':
            qkv = self.qkv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
            extents = None
        else:
            qkv = self.qkv(x)
            extents = self.predict_extents(x) if self.adaptive else None
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
            elif extents is None:  # fixed full windows
                out = sliding_window_attention_blocked(q, k, v, m, bias)
            else:
                out = reconstructed_window_attention(
                    q, k, v, m, extents[..., s, :], self.temperature, bias)
            outs.append(out.permute(0, 2, 3, 1, 4).reshape(B, H, W, C))
        out = self.project(self.fuse(x, outs))
        if self.record_extents and extents is not None:
            self.last_extents = extents.detach()
        result = (out, )
        if global_tokens is not None:
            result += (self.attend_globally(global_tokens, k, v), )
        if return_extents:
            result += (extents, )
        return result if len(result) > 1 else out

    def fuse(self, x: torch.Tensor, outs) -> torch.Tensor:
        """One (..., C) output per scale -> the projection's input."""
        if self.fusion == 'concat':
            weights = self.scale_weights.sigmoid().to(outs[0].dtype)
            return torch.cat([w * o for w, o in zip(weights, outs)], -1)
        if self.scale_gate is None:
            return outs[0]
        gates = self.scale_gate(x).softmax(-1)  # (..., scales)
        return sum(g[..., None] * o for g, o in zip(gates.unbind(-1), outs))

    def project(self, fused: torch.Tensor) -> torch.Tensor:
        return self.proj_drop(self.proj(F.dropout(fused, self.attn_drop,
                                                  self.training)))

    def attend_globally(self, tokens: torch.Tensor, k: torch.Tensor,
                        v: torch.Tensor) -> torch.Tensor:
        """Global tokens (B, n, C) over themselves and every pixel's key
        (k, v: (B, heads, H, W, d)); every scale sees the same result."""
        B, n, C = tokens.shape
        heads = self.num_heads
        qg, kg, vg = self.qkv(tokens).view(B, n, 3, heads, C // heads).permute(
            2, 0, 3, 1, 4).unbind(0)  # (B, heads, n, d)
        keys = torch.cat([kg, k.flatten(2, 3)], 2)
        values = torch.cat([vg, v.flatten(2, 3)], 2)
        out = attend(qg, keys, values).transpose(1, 2).reshape(B, n, C)
        if self.fusion == 'concat':
            out = self.fuse(tokens, [out] * len(self.window_sizes))
        # a gate sums to one over the identical per-scale outputs
        return self.project(out)


class RSWAttBlock(BaseModule):
    """Pre-norm block: ``x + DropPath(RSWAtt(LN(x)))``, then
    ``x + DropPath(MLP(LN(x)))``; tokens (B, n + H*W, C) with their map size
    (H, W): the ``n`` leading tokens (a ViT's class token, if any) attend
    globally (:meth:`ReconstructedWindowAttention.attend_globally`).
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
        # tokens before the H*W map (a class token) attend globally
        extra = L - hw_shape[0] * hw_shape[1]
        y = self.norm1(x)
        if extra:
            attn, global_out = self.attn(y[:, extra:].view(B, *hw_shape, C),
                                         global_tokens=y[:, :extra])
            attn = torch.cat([global_out, attn.reshape(B, -1, C)], 1)
        else:
            attn = self.attn(y.view(B, *hw_shape, C)).reshape(B, L, C)
        x = x + self.drop_path(attn)
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def forward(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, hw_shape,
                                 use_reentrant=False)
        return self._forward(x, hw_shape)
