"""Linear layers for CPU inference on oneDNN with prepacked weights.

PyTorch's eager ``F.linear`` re-reads the weight in its stored layout on
every call; oneDNN can reorder it once into the blocked layout its GEMM
kernels want (what ``torch.compile``'s CPU freezing pass does) and fuse the
bias and an exact GELU into the GEMM, with the same arithmetic. What it
pays differs by CPU (docs/benchmarks.md, "What each part of the fast path
pays": ``benchmark_backbone.py --ablate``). Used only inside :func:`packed_weights_scope`, which
:func:`fast_path` enters for a block (one transformer block's or patch
merging's call, whose chunks reuse the packed copy) when
:func:`mmvisattn.ops.backend.fast_path_allowed` says its fast path may
run, on CPU tensors of fp32 weights: in fp32 without autocast, and
in bf16 under CPU bf16 autocast where oneDNN has native bf16 (the weight
packed as bf16, the input cast to bf16, the output bf16: what autocast's
``F.linear`` computes, without its per-call weight cast and reorder);
everything else takes ``F.linear``.

The packed copies live for one scope, never longer: weights can change
between two forwards in ways no cheap key sees (mmengine's ``EMAHook``
swaps them through ``.data``, which bumps no version counter), a copy made
under ``torch.inference_mode()`` must not outlive it, and one block's
copies at a time cost little memory.
"""
import contextlib
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F

from .backend import fast_part, fast_path_allowed

# Packed weights of the running scope, per thread (id(linear) -> (key,
# packed)); never on the module, so deepcopy/pickle/state_dict of a model
# never meet a oneDNN tensor.
_LOCAL = threading.local()
ROWS_HINT = 4096  # rows per call on the chunked paths
# Packing a weight costs about one call's GEMM, so a linear first met with
# fewer rows than this runs unpacked (already packed in the scope, e.g. a
# chunk loop's short last chunk, it keeps its packed copy). One call that
# packs against F.linear, 2 threads (benchmark_bf16_kernels.py --only
# packing; docs/benchmarks.md, "When packing pays"): in fp32 it takes
# 0.70-1.05 of F.linear's time from 512 rows on (Swin-T's last stage at
# 800x1216 has 950 tokens) and 1.01-1.17 at 256; in bf16 1.07-1.27 at
# 256-512 rows and 0.91-1.13 from 950 to 3800.
_MIN_PACK_ROWS = {torch.float32: 512, torch.bfloat16: 1024}


@contextlib.contextmanager
def packed_weights_scope():
    """Cache packed weights for the block (one forward): each linear is
    packed on its first call inside it (the chunked paths call the same
    linear many times) and every copy is dropped at the end. Nested scopes
    share the outermost one."""
    if getattr(_LOCAL, 'packed', None) is not None:
        yield
        return
    _LOCAL.packed = {}
    try:
        yield
    finally:
        _LOCAL.packed = None


@contextlib.contextmanager
def fast_path(module: nn.Module, x: torch.Tensor):
    """The one entry of a block's fast path: yields whether ``module`` may
    take it on ``x`` (:func:`fast_path_allowed`, asked once), and runs the
    enclosed code inside :func:`packed_weights_scope` when it may (and the
    ``'packed_linears'`` part is on)."""
    allowed = fast_path_allowed(module, x)
    if allowed and fast_part('packed_linears'):
        with packed_weights_scope():
            yield True
    else:
        yield allowed


def run_packed(module: nn.Module, fn, x: torch.Tensor, *args):
    """``fn(x, *args)`` on ``module``'s :func:`fast_path`: a layer whose
    only fast part is its packed linears (patch merging)."""
    with fast_path(module, x):
        return fn(x, *args)


def _has_onednn() -> bool:
    return (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, '_linear_pointwise')
            and hasattr(torch.ops.mkldnn, '_reorder_linear_weight'))


_ONEDNN = _has_onednn()
# oneDNN runs bf16 GEMMs natively (avx512_bf16/AMX); elsewhere it emulates
# them, and the packed bf16 path would only add a reorder
_ONEDNN_BF16 = _ONEDNN and bool(
    getattr(torch.ops.mkldnn, '_is_mkldnn_bf16_supported', lambda: False)())


def pack_weight(weight: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight, rows)


def _packed_dtype(x: torch.Tensor, linear: nn.Linear):
    """The dtype the packed GEMM runs in, or None (``F.linear``). The scope
    is entered only where the block's fast path is allowed; what is left to
    check is what oneDNN's kernels take and whether packing pays."""
    packed = getattr(_LOCAL, 'packed', None)
    if not (_ONEDNN and packed is not None and x.device.type == 'cpu'
            and linear.weight.dtype == torch.float32):
        return None
    if torch.is_autocast_enabled('cpu'):
        if not (_ONEDNN_BF16
                and torch.get_autocast_dtype('cpu') == torch.bfloat16
                and x.dtype in (torch.float32, torch.bfloat16)):
            return None
        dtype = torch.bfloat16
    elif x.dtype == torch.float32:
        dtype = torch.float32
    else:
        return None
    if id(linear) not in packed and \
            x.numel() < _MIN_PACK_ROWS[dtype] * x.shape[-1]:
        return None
    return dtype


def _packed_weight(linear: nn.Linear, dtype: torch.dtype):
    """(packed weight, bias) in ``dtype``, packed once per scope."""
    weight = linear.weight
    # within one forward too, an in-place update (_version) or a new
    # tensor (data_ptr) repacks
    key = (weight._version, weight.data_ptr(), dtype)
    packed = _LOCAL.packed
    cached = packed.get(id(linear))
    if cached is None or cached[0] != key:
        bias = linear.bias
        if bias is not None:
            bias = bias.detach().to(dtype)
        cached = (key, pack_weight(weight.detach().to(dtype), ROWS_HINT), bias)
        packed[id(linear)] = cached
    return cached[1], cached[2]


def fast_linear(x: torch.Tensor, linear: nn.Linear,
                gelu: bool = False) -> torch.Tensor:
    """``linear(x)``, followed by exact GELU when ``gelu``."""
    dtype = _packed_dtype(x, linear)
    if dtype is None:
        out = linear(x)
        return F.gelu(out) if gelu else out
    weight, bias = _packed_weight(linear, dtype)
    out = torch.ops.mkldnn._linear_pointwise(
        x.reshape(-1, x.shape[-1]).to(dtype), weight, bias,
        'gelu' if gelu else 'none', [], 'none' if gelu else '')
    return out.view(*x.shape[:-1], out.shape[-1])
