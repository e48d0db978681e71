"""Linear layers for CPU inference on oneDNN with prepacked weights.

PyTorch's eager ``F.linear`` re-reads the weight in its stored layout on
every call; oneDNN can reorder it once into the blocked layout its GEMM
kernels want (what ``torch.compile``'s CPU freezing pass does) and fuse the
bias and an exact GELU into the GEMM. Same fp32 arithmetic, ~10-20% faster
on the Swin shapes. Used only where no gradient is needed; everything else
(training, autocast, other devices, torch.compile) takes ``F.linear``.
"""
import contextlib
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F

# Set to False to measure or debug the plain path.
ENABLED = True
# Packed weights live here, not on the module: deepcopy/pickle/state_dict of
# a model never meets a oneDNN tensor.
_PACKED: 'weakref.WeakKeyDictionary[nn.Linear, tuple]' = \
    weakref.WeakKeyDictionary()
_ROWS_HINT = 4096  # typical rows per call on the chunked paths


@contextlib.contextmanager
def plain_linears():
    """Run every ``fast_linear`` as ``linear(x)`` inside the block (module
    hooks then see the calls; tests compare both paths)."""
    global ENABLED
    before, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = before


def _has_onednn() -> bool:
    return (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, '_linear_pointwise')
            and hasattr(torch.ops.mkldnn, '_reorder_linear_weight'))


_ONEDNN = _has_onednn()


def _use_packed(x: torch.Tensor, linear: nn.Linear) -> bool:
    return (ENABLED and _ONEDNN and x.device.type == 'cpu'
            and x.dtype == torch.float32
            and linear.weight.dtype == torch.float32
            and not (torch.is_grad_enabled() and
                     (x.requires_grad or linear.weight.requires_grad))
            and not torch.is_autocast_enabled('cpu')
            and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing())  # FLOP counters trace aten.linear


def _packed_weight(linear: nn.Linear) -> torch.Tensor:
    weight = linear.weight
    # _version changes with every in-place update (optimizer step, load).
    key = (weight._version, weight.data_ptr())
    cached = _PACKED.get(linear)
    if cached is None or cached[0] != key:
        cached = (key, torch.ops.mkldnn._reorder_linear_weight(
            weight.detach(), _ROWS_HINT))
        _PACKED[linear] = cached
    return cached[1]


def fast_linear(x: torch.Tensor, linear: nn.Linear,
                gelu: bool = False) -> torch.Tensor:
    """``linear(x)``, followed by exact GELU when ``gelu``."""
    if not _use_packed(x, linear):
        out = linear(x)
        return F.gelu(out) if gelu else out
    out = torch.ops.mkldnn._linear_pointwise(
        x.reshape(-1, x.shape[-1]), _packed_weight(linear), linear.bias,
        'gelu' if gelu else 'none', [], 'none' if gelu else '')
    return out.view(*x.shape[:-1], out.shape[-1])
