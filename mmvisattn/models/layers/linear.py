"""The linear layer every transformer here projects with."""
import torch
import torch.nn as nn

from mmvisattn.ops import fast_part_allowed, packable_linear


class PackedLinear(nn.Linear):
    """``nn.Linear`` (the same parameters, keys and initialisation) that, on
    the CPU inference path, runs on oneDNN with its weight packed: the
    fast path's ``'packed_linears'`` part (:mod:`mmvisattn.ops.backend`,
    :func:`mmvisattn.ops.packable_linear`). Every other mode, and every
    device but the CPU, is ``nn.Linear``'s; hooks fire either way."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packable_linear(
            x, self.weight, self.bias,
            pack=fast_part_allowed(self, x, 'packed_linears'))
