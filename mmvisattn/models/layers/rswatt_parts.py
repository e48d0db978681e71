"""The parts of RSWAtt (:class:`ReconstructedWindowAttention`), each a class
registered in ``mmvisattn.registry.MODELS`` and chosen by ``type`` with its
own options:

* window predictors (``window_predictor=dict(type=...)``): from each
  query's feature, the extents (left, right, top, bottom, in pixels) of its
  window at every scale -- :class:`DirectExtents` (ours, the default),
  :class:`OffsetExtents`, :class:`AnchorExtents`,
  :class:`EnhancedAnchorExtents`; ``window_predictor=None`` keeps every
  window at its full M x M (plain sliding-window attention, the baseline);
* reconstructions (``reconstruction=dict(type=...)``): the attention of
  one scale over each query's window -- :class:`SoftWindows` (the predicted
  windows with soft borders) or :class:`MLPReweighting` (the paper's module:
  cosine attention over the whole window, re-weighted by an MLP);
* fusions (``fusion=dict(type=...)``): how the scales' outputs combine
  before the output projection -- :class:`GateFusion` or
  :class:`ConcatFusion`.

The attention supplies what it owns (``embed_dims``, ``num_heads``,
``scale_windows``, the number of scales); everything else is the part's own
option, checked when the attention is built
(:func:`~mmvisattn.models.layers.builder.build_part`, the one builder of
every attention part): an option the chosen part does not take is an error
that names both.
"""
import math
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn

from mmvisattn.ops import (
    reconstructed_window_attention,
    reweighted_window_attention,
    sliding_window_attention_blocked,
)
from mmvisattn.registry import MODELS

from .linear import PackedLinear

# anchor windows as fractions of the largest extents (left, right, top,
# bottom): full, small square, wide, tall
DEFAULT_ANCHORS = ((1., 1., 1., 1.), (.4, .4, .4, .4), (1., 1., .3, .3),
                   (.3, .3, 1., 1.))
# the enhanced reconstructor's 8 anchors: three squares, two wide, two tall
# and one off-centre pair covering each half
ENHANCED_ANCHORS = ((1., 1., 1., 1.), (.6, .6, .6, .6), (.3, .3, .3, .3),
                    (1., 1., .4, .4), (.6, .6, .2, .2), (.4, .4, 1., 1.),
                    (.2, .2, .6, .6), (1., 0., 1., 0.))


def max_extents(m: int) -> torch.Tensor:
    """(left, right, top, bottom) of the full m x m neighbourhood."""
    before, after = m // 2, m - 1 - m // 2
    return torch.tensor([before, after, before, after], dtype=torch.float)


# ------------------------------------------------------ window predictors
class WindowPredictor(nn.Module):
    """(B, H, W, C) features -> (B, H, W, scales, 4) window extents (left,
    right, top, bottom) in pixels, each within its scale's full window.

    Subclasses take ``embed_dims`` and ``scale_windows`` (supplied by the
    attention) before their own options."""

    def __init__(self, embed_dims: int, scale_windows: Sequence[int]):
        super().__init__()
        self.scale_windows = tuple(int(m) for m in scale_windows)
        # (scales, 4): left, right, top, bottom of each full M x M window
        self.register_buffer(
            'extent_limits',
            torch.stack([max_extents(m) for m in self.scale_windows]),
            persistent=False)

    @property
    def num_scales(self) -> int:
        return len(self.scale_windows)

    def init_weights(self):
        """Every query starts at the same window."""

    def per_scale(self, x: torch.Tensor, layer: nn.Module) -> torch.Tensor:
        """``layer(x)`` as (B, H, W, scales, per scale)."""
        B, H, W, _ = x.shape
        return layer(x).view(B, H, W, self.num_scales, -1)


@MODELS.register_module()
class DirectExtents(WindowPredictor):
    """Ours (the default): a linear layer, a sigmoid per side, times the
    scale's largest extents.

    Args:
        init_extent (float): the starting window, as a fraction of the
            largest (the bias of the zero-initialised layer).
        gain (float): the layer's outputs are multiplied by it before the
            sigmoid. AdamW moves each weight by about the learning rate per
            step whatever the gradient's size, so at gain 1 the windows of a
            200-iteration run (lr 2e-4) moved by hundredths of M; 10 lets
            them spread (docs/backbones.md#learned-windows): a 10x learning
            rate on the predictor without a config entry.
    """

    def __init__(self,
                 embed_dims: int,
                 scale_windows: Sequence[int],
                 init_extent: float = 0.75,
                 gain: float = 10.):
        super().__init__(embed_dims, scale_windows)
        if not 0 < init_extent < 1:
            raise ValueError(f'DirectExtents: init_extent must be in (0, 1), '
                             f'got {init_extent}')
        self.init_extent = init_extent
        self.gain = gain
        self.linear = nn.Linear(embed_dims, 4 * self.num_scales)

    def init_weights(self):
        nn.init.zeros_(self.linear.weight)
        # the sigmoid's inverse at init_extent, before the gain
        nn.init.constant_(self.linear.bias, math.log(
            self.init_extent / (1 - self.init_extent)) / self.gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raw = self.per_scale(x, self.linear)
        limits = self.extent_limits.to(raw.dtype)
        return (raw * self.gain).sigmoid() * limits


@MODELS.register_module()
class OffsetExtents(WindowPredictor):
    """The source's: Linear-ReLU-Linear to four offsets around the query's
    reference window (``init_extent`` of its scale's), in units of the
    largest window of all scales, clamped to the scale's window. Its own
    scaling by the largest window replaces a gain.

    Args:
        init_extent (float): the reference window, as a fraction of the
            largest (where every window starts: the last layer starts at
            zero).
        hidden_dims (int, optional): the hidden width; None: ``max(16,
            embed_dims // 4)``.
    """

    def __init__(self,
                 embed_dims: int,
                 scale_windows: Sequence[int],
                 init_extent: float = 0.75,
                 hidden_dims: Optional[int] = None):
        super().__init__(embed_dims, scale_windows)
        self.init_extent = init_extent
        hidden = hidden_dims or max(16, embed_dims // 4)
        self.mlp = nn.Sequential(nn.Linear(embed_dims, hidden),
                                 nn.ReLU(inplace=True),
                                 nn.Linear(hidden, 4 * self.num_scales))

    def init_weights(self):
        nn.init.zeros_(self.mlp[-1].weight)
        nn.init.zeros_(self.mlp[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raw = self.per_scale(x, self.mlp)
        limits = self.extent_limits.to(raw.dtype)
        extents = self.init_extent * limits + raw * max(self.scale_windows)
        return torch.minimum(extents.clamp(min=0), limits)


@MODELS.register_module()
class AnchorExtents(WindowPredictor):
    """A softmax mixture of fixed anchor windows per query and scale (the
    weights from a linear layer).

    Args:
        anchors (sequence, optional): anchor windows (left, right, top,
            bottom as fractions of the largest); None: the class's own,
            :data:`DEFAULT_ANCHORS` (full, small square, wide, tall).
        gain (float): as :class:`DirectExtents`'s, before the softmax.
    """
    default_anchors = DEFAULT_ANCHORS
    outputs_per_anchor = 1  # its weight

    def __init__(self,
                 embed_dims: int,
                 scale_windows: Sequence[int],
                 anchors: Optional[Sequence[Sequence[float]]] = None,
                 gain: float = 10.):
        super().__init__(embed_dims, scale_windows)
        anchors = torch.tensor(
            self.default_anchors if anchors is None else anchors).float()
        if anchors.dim() != 2 or anchors.shape[1] != 4 or not len(anchors):
            raise ValueError(f'{type(self).__name__}: anchors must be (left, '
                             'right, top, bottom) fractions, one row per '
                             f'anchor; got shape {tuple(anchors.shape)}')
        self.register_buffer('anchors', anchors, persistent=False)
        self.gain = gain
        self.linear = nn.Linear(embed_dims,
                                self.outputs_per_anchor * len(anchors) *
                                self.num_scales)

    def init_weights(self):
        # the uniform mixture everywhere
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raw = self.per_scale(x, self.linear)
        limits = self.extent_limits.to(raw.dtype)
        return self.mix(raw * self.gain) * limits

    def mix(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., anchors) logits -> (..., 4) window fractions."""
        return logits.softmax(-1) @ self.anchors.to(logits.dtype)


@MODELS.register_module()
class EnhancedAnchorExtents(AnchorExtents):
    """The source's enhanced reconstructor: every anchor window rescaled per
    query by its own four predicted factors (``2 sigmoid``: 1 at the start,
    so each anchor starts as itself), then mixed by softmax weights.

    Args:
        anchors (sequence, optional): None: :data:`ENHANCED_ANCHORS` (8
            windows).
        gain (float): as :class:`DirectExtents`'s.
    """
    default_anchors = ENHANCED_ANCHORS
    outputs_per_anchor = 5  # its weight and 4 scale factors

    def mix(self, logits: torch.Tensor) -> torch.Tensor:
        num = len(self.anchors)
        weights, scales = logits.split([num, 4 * num], -1)
        scales = scales.unflatten(-1, (num, 4))
        anchors = (self.anchors.to(logits.dtype) * 2 *
                   scales.sigmoid()).clamp(max=1)
        return (weights.softmax(-1)[..., None] * anchors).sum(-2)


# --------------------------------------------------------- reconstructions
class WindowReconstruction(nn.Module):
    """The attention of one scale: ``forward(q, k, v, scale, bias,
    extents)`` with q, k, v (B, heads, H, W, d), the scale's index, its
    (heads, M*M) relative position bias and the predicted (B, H, W, 4)
    extents (None without a window predictor) -> (B, heads, H, W, d).

    Subclasses take ``num_heads`` and ``scale_windows`` (supplied by the
    attention) before their own options."""
    #: whether it attends predicted windows (else ``window_predictor=None``)
    takes_window_predictor = True
    #: whether global tokens (a class token) can attend with its qkv
    takes_global_tokens = True
    #: its own options that mean something only with a window predictor
    predictor_options: Tuple[str, ...] = ()

    def __init__(self, num_heads: int, scale_windows: Sequence[int]):
        super().__init__()
        self.scale_windows = tuple(int(m) for m in scale_windows)

    @staticmethod
    def qkv_projection(embed_dims: int, bias: bool) -> nn.Module:
        """The attention's qkv: (B, H, W, C) -> (B, H, W, 3C)."""
        return PackedLinear(embed_dims, embed_dims * 3, bias=bias)

    @classmethod
    def check_window_predictor(cls, window_predictor, options: dict):
        """Refuse a window predictor it does not use, or its own options
        that mean nothing without one."""
        name = cls.__name__
        if window_predictor is not None and not cls.takes_window_predictor:
            raise ValueError(
                f'reconstruction=dict(type={name!r}) takes no window '
                f'predictor (got window_predictor={window_predictor!r}); '
                'set window_predictor=None')
        unused = [k for k in cls.predictor_options if k in options]
        if window_predictor is None and unused:
            raise ValueError(
                f'reconstruction=dict(type={name!r}): {", ".join(unused)} '
                'applies to predicted windows only; with '
                'window_predictor=None every window is the full M x M')

    def init_weights(self):
        pass


@MODELS.register_module()
class SoftWindows(WindowReconstruction):
    """Soft attention windows (:func:`mmvisattn.ops.
    reconstructed_window_attention`): a key's membership of its query's
    predicted window is a product of sigmoids of its distance to each border
    over ``temperature``, added to the logits as a log-mask, so the extents
    get gradients; without a window predictor, plain sliding-window
    attention over the full M x M.

    Args:
        temperature (float): softness of the window borders (predicted
            windows only).
    """
    predictor_options = ('temperature', )

    def __init__(self, num_heads: int, scale_windows: Sequence[int],
                 temperature: float = 0.5):
        super().__init__(num_heads, scale_windows)
        if not temperature > 0:
            raise ValueError(f'SoftWindows: temperature must be > 0, got '
                             f'{temperature}')
        self.temperature = temperature

    def forward(self, q, k, v, scale: int, bias: torch.Tensor,
                extents: Optional[torch.Tensor]) -> torch.Tensor:
        m = self.scale_windows[scale]
        if extents is None:  # fixed full windows
            return sliding_window_attention_blocked(q, k, v, m, bias)
        return reconstructed_window_attention(q, k, v, m, extents,
                                              self.temperature, bias)


class ChannelsLastConvQKV(nn.Sequential):
    """1x1 conv then 3x3 depthwise conv to q, k, v, on (B, H, W, C) maps
    (the convolutions run channels-first)."""

    def __init__(self, embed_dims: int, bias: bool):
        super().__init__(
            nn.Conv2d(embed_dims, embed_dims * 3, 1, bias=bias),
            nn.Conv2d(embed_dims * 3, embed_dims * 3, 3, padding=1,
                      groups=embed_dims * 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


@MODELS.register_module()
class MLPReweighting(WindowReconstruction):
    """Our reading of the paper's own module: a convolutional qkv (1x1 then
    3x3 depthwise), cosine attention with a learned temperature per head
    over the whole M x M window, its weights re-weighted by an MLP over the
    window positions (``R = A + MLP(A)``, the MLP's last layer starting at
    zero: plain window attention at the start;
    :func:`mmvisattn.ops.reweighted_window_attention`). It attends the
    whole window: no window predictor, and no global tokens (the qkv is
    convolutional)."""
    takes_window_predictor = False
    takes_global_tokens = False

    def __init__(self, num_heads: int, scale_windows: Sequence[int]):
        super().__init__(num_heads, scale_windows)
        self.logit_scale = nn.Parameter(
            torch.full((num_heads, ), math.log(10.)))
        self.reweight = nn.ModuleList(
            nn.Sequential(nn.Linear(m * m, m * m), nn.GELU(),
                          nn.Linear(m * m, m * m))
            for m in self.scale_windows)

    @staticmethod
    def qkv_projection(embed_dims: int, bias: bool) -> nn.Module:
        return ChannelsLastConvQKV(embed_dims, bias)

    def init_weights(self):
        for mlp in self.reweight:  # start as plain window attention
            nn.init.zeros_(mlp[-1].weight)
            nn.init.zeros_(mlp[-1].bias)

    def forward(self, q, k, v, scale: int, bias: torch.Tensor,
                extents: Optional[torch.Tensor]) -> torch.Tensor:
        return reweighted_window_attention(
            q, k, v, self.scale_windows[scale],
            self.logit_scale.exp().clamp(max=100.), self.reweight[scale],
            bias)


# ----------------------------------------------------------------- fusions
class ScaleFusion(nn.Module):
    """``forward(x, outs)``: the scales' (..., C) outputs (and the layer's
    input ``x``) -> the output projection's (..., ``out_dims``) input.

    Subclasses take ``embed_dims`` and ``num_scales`` (supplied by the
    attention) before their own options."""

    def __init__(self, embed_dims: int, num_scales: int):
        super().__init__()
        self.num_scales = num_scales
        self.out_dims = embed_dims

    def fuse_identical(self, x: torch.Tensor,
                       out: torch.Tensor) -> torch.Tensor:
        """The fusion of ``out`` given by every scale (global tokens)."""
        return self(x, [out] * self.num_scales)


@MODELS.register_module()
class GateFusion(ScaleFusion):
    """Ours (the default): a softmax gate over the scales per query, from a
    linear layer on its input; one scale passes through."""

    def __init__(self, embed_dims: int, num_scales: int):
        super().__init__(embed_dims, num_scales)
        self.gate = nn.Linear(embed_dims, num_scales) \
            if num_scales > 1 else None

    def forward(self, x: torch.Tensor,
                outs: Sequence[torch.Tensor]) -> torch.Tensor:
        if self.gate is None:
            return outs[0]
        gates = self.gate(x).softmax(-1)  # (..., scales)
        return sum(g[..., None] * o for g, o in zip(gates.unbind(-1), outs))

    def fuse_identical(self, x: torch.Tensor,
                       out: torch.Tensor) -> torch.Tensor:
        return out  # the gates sum to one


@MODELS.register_module()
class ConcatFusion(ScaleFusion):
    """The source's: a learned sigmoid weight per scale (starting at 1/2),
    concatenation, and the output projection from scales x C to C."""

    def __init__(self, embed_dims: int, num_scales: int):
        super().__init__(embed_dims, num_scales)
        self.scale_weights = nn.Parameter(torch.zeros(num_scales))
        self.out_dims = embed_dims * num_scales

    def forward(self, x: torch.Tensor,
                outs: Sequence[torch.Tensor]) -> torch.Tensor:
        weights = self.scale_weights.sigmoid().to(outs[0].dtype)
        return torch.cat([w * o for w, o in zip(weights, outs)], -1)
