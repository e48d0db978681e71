"""Multi-head self-attention (Vaswani et al., 2017), the base of every
attention kind a Swin block or TNT takes.

:class:`SelfAttention` owns what all of them share: the ``qkv`` and
``proj`` projections (the official names, so released checkpoints load),
the head split and the output dropout. A kind says how queries meet keys
in :meth:`SelfAttention.attend`, with the kernels of :mod:`mmvisattn.ops`:

- :class:`GlobalAttention`: full softmax attention over all tokens;
- :class:`PerformerAttention`: FAVOR+ linear attention over all tokens;
- the windowed kinds (:mod:`.window_msa`: Swin's windows and sliding
  windows; :mod:`.swin_v2`: V2's cosine windows) extend it with a window
  and a relative position bias.

Every kind is called ``attn(x)`` on channels-last tokens and returns their
shape; what a kind needs beyond its input (a window, a shift) is a
constructor argument.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
from mmengine.model import BaseModule

from mmvisattn.ops import (
    attend,
    orthogonal_random_features,
    performer_attention,
    window_attention_weights,
)
from mmvisattn.registry import MODELS

from .builder import registered_kinds
from .linear import PackedLinear

# Rows processed at once by the CPU inference path's chunks (ops.backend's
# 'window_chunks' and 'mlp_chunks'): the (rows, 4C) MLP hidden state and
# one chunk of windows' q/k/v/logits stay in the CPU's L2/L3 instead of
# streaming the whole map through memory between ops.
CHUNK_TOKENS = 4096


class SelfAttention(BaseModule):
    """Multi-head self-attention's shared parts: ``qkv`` (C -> 3C: q, then
    k, then v, heads within each), the head split and ``proj``. A kind
    implements :meth:`attend` (the projected output, before dropout).

    ``chunk_tokens``: rows per chunk on the CPU inference path, for this
    attention where it chunks and for its block's MLP."""

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 attn_drop_rate: float = 0.,
                 proj_drop_rate: float = 0.,
                 chunk_tokens: int = CHUNK_TOKENS,
                 init_cfg=None):
        super().__init__(init_cfg)
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims={embed_dims} is not divisible by '
                             f'num_heads={num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.scale = qk_scale or (embed_dims // num_heads)**-0.5
        self.attn_drop_rate = attn_drop_rate
        self.chunk_tokens = chunk_tokens
        self.qkv = PackedLinear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = PackedLinear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)

    @staticmethod
    def kinds():
        """Names of the registered attention kinds, sorted."""
        return registered_kinds(SelfAttention)

    def project_qkv(self, x: torch.Tensor) -> torch.Tensor:
        """(*, L, C) tokens -> (*, L, 3C) queries, keys and values: the one
        place they are projected."""
        return self.qkv(x)

    def _split_heads(self, qkv: torch.Tensor):
        """(*, L, 3C) -> q, k, v each (*, heads, L, d), contiguous (the CPU
        fused attention kernel is several times slower on strided input)."""
        *lead, L, _ = qkv.shape
        qkv = qkv.view(*lead, L, 3, self.num_heads, -1)
        perm = (len(lead) + 1, *range(len(lead)), len(lead) + 2, len(lead),
                len(lead) + 3)
        return qkv.permute(*perm).contiguous().unbind(0)

    def _token_qkv(self, x: torch.Tensor):
        """q, k, v (B, heads, N, d) of every token of ``x`` (B, ..., C)."""
        return self._split_heads(
            self.project_qkv(x.reshape(x.shape[0], -1, x.shape[-1])))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        """Channels-last tokens -> the projected attention output, same
        shape."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj_drop(self.attend(x))


@MODELS.register_module()
class GlobalAttention(SelfAttention):
    """Full softmax self-attention over all tokens. Tokens come
    channels-last in any layout, a (B, H, W, C) map (the quadratic reference
    of Swin's ablations, the HTC++ backbone's extra global block) or a
    (B, N, C) sequence (TNT's inner and outer transformers); the output has
    the input's shape."""

    def global_attention(self, q, k, v):
        return attend(q, k, v, scale=self.scale,
                      dropout_p=self.attn_drop_rate if self.training else 0.)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        out = self.global_attention(*self._token_qkv(x))
        return self.proj(out.transpose(1, 2).reshape(x.shape))

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """(B, heads, N, N) attention probabilities of ``forward(x)``, for
        analysis (the fused kernel never returns them)."""
        q, k, _ = self._token_qkv(x)
        return window_attention_weights(q.unsqueeze(1), k.unsqueeze(1),
                                        scale=self.scale)[:, 0]


@MODELS.register_module()
class PerformerAttention(GlobalAttention):
    """FAVOR+ (Performer) linear attention over all tokens.

    ``performer_features``: random features m, default d ln d for head
    width d (the FAVOR+ paper's choice). They are drawn once and saved with
    the weights (``performer_projection``), so a checkpoint reproduces its
    outputs exactly."""

    def __init__(self, *args, performer_features: Optional[int] = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        head_dims = self.embed_dims // self.num_heads
        if performer_features is None:
            performer_features = max(1, round(head_dims * math.log(head_dims)))
        self.register_buffer(
            'performer_projection',
            orthogonal_random_features(performer_features, head_dims))

    def global_attention(self, q, k, v):
        return performer_attention(q, k, v, self.performer_projection,
                                   self.scale)

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(
            'PerformerAttention approximates softmax attention with random '
            'features and forms no (N, N) probabilities')
