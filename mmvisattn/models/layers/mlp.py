"""The transformer MLP under the names of the released checkpoints."""
from typing import Optional

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule

from mmvisattn.ops import (
    fast_part,
    fast_part_allowed,
    observed,
    packable_linear,
    packed_weights_scope,
)

from .linear import PackedLinear


class Mlp(BaseModule):
    """fc1 -> activation -> dropout -> fc2 -> dropout; given the block's
    ``identity``, its residual too: ``identity + DropPath(MLP(x))``, as
    mmcv's ``FFN`` (mmdet's and mmseg's Swin) adds its identity after its
    DropPath ``dropout_layer``.

    The parameter names (``fc1``, ``fc2``) are those of the official Swin
    and TNT releases and of timm, so their checkpoints load as they are.
    With ``chunk_rows``, CPU inference runs that many rows at a time (the
    fast path's ``'mlp_chunks'`` part, :mod:`mmvisattn.ops.backend`), so
    that a chunk's hidden state (``hidden_features`` wide) stays in the
    CPU's cache instead of streaming through memory between the two
    linears, and the residual is added to each chunk's rows while they are
    there; the result is the same.
    """

    def __init__(self,
                 in_features: int,
                 hidden_features: int,
                 act_cfg: dict = dict(type='GELU'),
                 drop: float = 0.,
                 drop_path_rate: float = 0.,
                 chunk_rows: Optional[int] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg)
        self.fc1 = PackedLinear(in_features, hidden_features)
        self.act = build_activation_layer(act_cfg)
        self.drop1 = nn.Dropout(drop)
        self.fc2 = PackedLinear(hidden_features, in_features)
        self.drop2 = nn.Dropout(drop)
        # on the residual branch only (with ``identity``)
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))
        self.chunk_rows = chunk_rows

    def forward(self, x: torch.Tensor,
                identity: Optional[torch.Tensor] = None) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if self.chunk_rows and rows > self.chunk_rows and \
                fast_part_allowed(self, x, 'mlp_chunks'):
            return self.forward_in_chunks(x, identity)
        out = self.drop2(self.fc2(self.drop1(self.hidden(x))))
        return out if identity is None else identity + self.drop_path(out)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """``act(fc1(x))``; on the fast path's ``'fused_gelu'`` part, a GELU
        is computed inside fc1's GEMM (oneDNN's post-op) instead of in a
        second pass over the 4C-wide hidden state. That skips fc1's and
        act's own calls, so it runs only where nothing would see them: no
        hook observes either module (:func:`mmvisattn.ops.observed`)."""
        if self.fusable_gelu is not None and \
                fast_part_allowed(self, x, 'fused_gelu') and \
                not observed(self.fc1, self.act):
            return packable_linear(
                x, self.fc1.weight, self.fc1.bias,
                pack=fast_part('packed_linears'),  # fc1's own condition
                gelu=self.fusable_gelu)
        return self.act(self.fc1(x))

    @property
    def fusable_gelu(self) -> Optional[str]:
        """The GELU's approximation (``'none'``, ``'tanh'``) when ``act`` is
        torch's GELU, which oneDNN can fuse; else None."""
        return self.act.approximate if isinstance(self.act, nn.GELU) \
            else None

    def forward_in_chunks(self, x: torch.Tensor,
                          identity: Optional[torch.Tensor] = None
                          ) -> torch.Tensor:
        """``forward`` in eval mode (dropout and DropPath are identities),
        ``chunk_rows`` rows at a time, each chunk's output (plus its rows of
        ``identity``) written while it is in cache, each linear packed once
        for all chunks."""
        flat = x.reshape(-1, x.shape[-1])
        residual = None if identity is None else \
            identity.reshape(len(flat), -1)
        out = None
        with packed_weights_scope():
            for start in range(0, len(flat), self.chunk_rows):
                rows = slice(start, start + self.chunk_rows)
                chunk = self.fc2(self.hidden(flat[rows]))
                if out is None:  # the dtype `identity + chunk` has
                    dtype = chunk.dtype if residual is None else \
                        torch.result_type(residual, chunk)
                    out = chunk.new_empty(len(flat), chunk.shape[-1],
                                          dtype=dtype)
                if residual is None:
                    out[rows] = chunk
                else:
                    torch.add(residual[rows], chunk, out=out[rows])
        return out.view(*x.shape[:-1], out.shape[-1])
