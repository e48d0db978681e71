"""RSWAtt: reconstructed sliding-window attention, the plug-in module and its
transformer block.

Every position attends its own sliding neighbourhood at several maximum
window sizes in parallel (multi-scale), with a 2D relative position bias per
scale; the scales' outputs are fused per query and projected. Three parts,
each a registered class chosen by ``type`` with its own options
(:mod:`.rswatt_parts`), make the variants:

* ``window_predictor``: each query predicts the extents of its own window
  (left, right, top, bottom, up to the scale's maximum window) --
  :class:`DirectExtents` (default), :class:`OffsetExtents`,
  :class:`AnchorExtents`, :class:`EnhancedAnchorExtents`; ``None`` keeps
  every window at its full M x M (plain sliding-window attention,
  :func:`mmvisattn.ops.sliding_window_attention_blocked`), the baseline
  every adaptive variant is measured against;
* ``reconstruction``: :class:`SoftWindows` (default: the predicted windows
  with soft borders, :func:`mmvisattn.ops.reconstructed_window_attention`)
  or :class:`MLPReweighting` (the paper's module);
* ``fusion``: :class:`GateFusion` (default: learned gates per query) or
  :class:`ConcatFusion` (the source's sigmoid weight per scale,
  concatenation and a linear layer).

Every RSWAtt attention returns an :class:`RSWAttOutput`.
"""
from typing import NamedTuple, Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.ops import (
    attend,
    check_window,
    sliding_relative_index,
)
from mmvisattn.registry import MODELS

from .builder import build_part, resolve_part
from .linear import PackedLinear
from .mlp import Mlp
from .rswatt_parts import (
    ScaleFusion,
    WindowPredictor,
    WindowReconstruction,
)


class RSWAttOutput(NamedTuple):
    """What every RSWAtt attention returns."""
    out: torch.Tensor  #: (B, H, W, C)
    #: (B, H, W, scales, 4) predicted window extents (left, right, top,
    #: bottom) in pixels; None without a window predictor
    extents: Optional[torch.Tensor] = None
    #: (B, n, C) the global tokens' output; None without global tokens
    global_out: Optional[torch.Tensor] = None


@MODELS.register_module()
class ReconstructedWindowAttention(BaseModule):
    """RSWAtt on (B, H, W, C) maps.

    Args:
        embed_dims (int): channels C.
        num_heads (int): heads.
        scale_windows (int | sequence): the largest window of each scale,
            e.g. (5, 9); an int (one scale) is plain single-scale RSWAtt.
            (``window_size`` is one window everywhere in the package: an
            int or an (h, w) pair; RSWAtt's windows are square, one per
            scale, hence a name of their own.)
        window_predictor (dict | None): ``dict(type=NAME, **options)`` of a
            registered :class:`WindowPredictor` (``'DirectExtents'``,
            ``'OffsetExtents'``, ``'AnchorExtents'``,
            ``'EnhancedAnchorExtents'``); None: every window at its full
            M x M (no predictor).
        reconstruction (dict): a registered :class:`WindowReconstruction`:
            ``dict(type='SoftWindows', temperature=0.5)`` or
            ``dict(type='MLPReweighting')`` (with ``window_predictor=None``).
        fusion (dict): a registered :class:`ScaleFusion`:
            ``dict(type='GateFusion')`` or ``dict(type='ConcatFusion')``.
        qkv_bias (bool): bias of the qkv projection.
        attn_drop, proj_drop (float): dropout before and after the output
            projection.

    ``forward(x, global_tokens=None)`` returns an :class:`RSWAttOutput`.
    The parameters are ``qkv``, ``proj`` and ``relative_position_bias_tables``
    here, and each part's under ``window_pred``, ``reconstruction`` and
    ``fusion``.
    """
    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 scale_windows: Union[int, Sequence[int]] = (5, 9),
                 window_predictor: Optional[dict] = dict(
                     type='DirectExtents'),
                 reconstruction: dict = dict(type='SoftWindows'),
                 fusion: dict = dict(type='GateFusion'),
                 qkv_bias: bool = True,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                             f'num_heads {num_heads}')
        # one square window per scale (ops.check_window checks each)
        windows = (scale_windows, ) if isinstance(scale_windows, int) else \
            tuple(scale_windows)
        if not windows:
            raise ValueError('scale_windows must be a positive int or a '
                             'sequence of them (one window per scale), got '
                             f'{scale_windows!r}')
        for i, m in enumerate(windows):
            check_window(m, type(self).__name__, f'scale_windows[{i}]',
                         pairs=False)
        self.num_heads = num_heads
        self.scale_windows = windows
        scales = len(self.scale_windows)
        recon_cls, recon_options = resolve_part(
            'reconstruction', reconstruction, WindowReconstruction)
        recon_cls.check_window_predictor(window_predictor, recon_options)
        # the reconstruction chooses the qkv (MLP re-weighting splits it)
        self.qkv = recon_cls.qkv_projection(embed_dims, qkv_bias)
        owner = 'the attention'
        self.reconstruction = build_part(
            'reconstruction', reconstruction, WindowReconstruction, owner,
            num_heads=num_heads, scale_windows=self.scale_windows)
        self.window_pred = None if window_predictor is None else build_part(
            'window_predictor', window_predictor, WindowPredictor, owner,
            embed_dims=embed_dims, scale_windows=self.scale_windows)
        self.fusion = build_part('fusion', fusion, ScaleFusion, owner,
                                 embed_dims=embed_dims, num_scales=scales)
        self.proj = PackedLinear(self.fusion.out_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.attn_drop = attn_drop
        self.relative_position_bias_tables = nn.ParameterList(
            nn.Parameter(torch.zeros((2 * m - 1)**2, num_heads))
            for m in self.scale_windows)
        for m in self.scale_windows:
            self.register_buffer(f'relative_index_{m}',
                                 sliding_relative_index(m).clone(),
                                 persistent=False)

    def init_weights(self):
        super().init_weights()
        for table in self.relative_position_bias_tables:
            trunc_normal_(table, std=.02)
        # explicitly, not only through BaseModule's first call: heads call
        # this again after re-initialising every linear layer
        self.reconstruction.init_weights()
        if self.window_pred is not None:
            self.window_pred.init_weights()

    def forward(self, x: torch.Tensor,
                global_tokens: Optional[torch.Tensor] = None
                ) -> RSWAttOutput:
        """``x`` (B, H, W, C) -> :class:`RSWAttOutput`.

        ``global_tokens`` (B, n, C), e.g. a ViT's class token, attend every
        pixel and each other with the same projections (their window is the
        whole image; pixels do not attend them); their output is
        ``global_out``."""
        B, H, W, C = x.shape
        heads = self.num_heads
        if global_tokens is not None and \
                not self.reconstruction.takes_global_tokens:
            raise ValueError(
                f'global tokens need a reconstruction with a linear qkv; '
                f'{type(self.reconstruction).__name__} has a convolutional '
                'one')
        qkv = self.project_qkv(x)
        extents = self.window_pred(x) if self.window_pred is not None \
            else None
        q, k, v = qkv.reshape(B, H, W, 3, heads, C // heads).permute(
            3, 0, 4, 1, 2, 5).unbind(0)  # (B, heads, H, W, d)
        outs = []
        for s, m in enumerate(self.scale_windows):
            table = self.relative_position_bias_tables[s]
            bias = table[getattr(self, f'relative_index_{m}')].t()
            window = None if extents is None else extents[..., s, :]
            out = self.reconstruction(q, k, v, s, bias, window)
            outs.append(out.permute(0, 2, 3, 1, 4).reshape(B, H, W, C))
        out = self.project(self.fusion(x, outs))
        global_out = None if global_tokens is None else \
            self.attend_globally(global_tokens, k, v)
        return RSWAttOutput(out, extents, global_out)

    def project_qkv(self, x: torch.Tensor) -> torch.Tensor:
        return self.qkv(x)

    def project(self, fused: torch.Tensor) -> torch.Tensor:
        return self.proj_drop(self.proj(
            F.dropout(fused, self.attn_drop, self.training)))

    def attend_globally(self, tokens: torch.Tensor, k: torch.Tensor,
                        v: torch.Tensor) -> torch.Tensor:
        """Global tokens (B, n, C) over themselves and every pixel's key
        (k, v: (B, heads, H, W, d)); every scale sees the same result."""
        B, n, C = tokens.shape
        heads = self.num_heads
        qg, kg, vg = self.project_qkv(tokens).view(
            B, n, 3, heads, C // heads).permute(
            2, 0, 3, 1, 4).unbind(0)  # (B, heads, n, d)
        keys = torch.cat([kg, k.flatten(2, 3)], 2)
        values = torch.cat([vg, v.flatten(2, 3)], 2)
        out = attend(qg, keys, values).transpose(1, 2).reshape(B, n, C)
        return self.project(self.fusion.fuse_identical(tokens, out))


def build_rswatt_attention(owner: str, attn_cfg: Optional[dict],
                           embed_dims: int, num_heads: int,
                           scale_windows: Sequence[int],
                           **supplied) -> ReconstructedWindowAttention:
    """The RSWAtt attention of ``attn_cfg`` (``type``: any registered
    subclass of :class:`ReconstructedWindowAttention`, by default that
    class; the other keys its options) for the module ``owner``, which sets
    ``embed_dims``, ``num_heads``, ``scale_windows`` and what it
    ``supplied`` (dropout rates) itself (:func:`~.builder.build_part`)."""
    return build_part('attn_cfg', attn_cfg, ReconstructedWindowAttention,
                      owner, default='ReconstructedWindowAttention',
                      embed_dims=embed_dims, num_heads=num_heads,
                      scale_windows=scale_windows, **supplied)


class RSWAttBlock(BaseModule):
    """Pre-norm block: ``x + DropPath(RSWAtt(LN(x)))``, then
    ``x + DropPath(MLP(LN(x)))``; tokens (B, n + H*W, C) with their map size
    (H, W): the ``n`` leading tokens (a ViT's class token, if any) attend
    globally (:meth:`ReconstructedWindowAttention.attend_globally`).
    ``attn_cfg``: the attention's ``type`` (a registered subclass of
    :class:`ReconstructedWindowAttention`, that class by default) and its
    options (``window_predictor``, ``reconstruction``, ``fusion``...;
    :func:`build_rswatt_attention`)."""

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 scale_windows: Sequence[int] = (5, 9),
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
        self.attn = build_rswatt_attention(
            type(self).__name__, attn_cfg, embed_dims, num_heads,
            scale_windows, attn_drop=attn_drop_rate, proj_drop=drop_rate)
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
            result = self.attn(y[:, extra:].view(B, *hw_shape, C),
                               global_tokens=y[:, :extra])
            attn = torch.cat([result.global_out,
                              result.out.reshape(B, -1, C)], 1)
        else:
            attn = self.attn(y.view(B, *hw_shape, C)).out.reshape(B, L, C)
        x = x + self.drop_path(attn)
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def forward(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, hw_shape,
                                 use_reentrant=False)
        return self._forward(x, hw_shape)
