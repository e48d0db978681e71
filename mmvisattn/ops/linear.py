"""Linear layers for CPU inference on oneDNN with prepacked weights.

PyTorch's eager ``F.linear`` re-reads the weight in its stored layout on
every call; oneDNN can reorder it once into the blocked layout its GEMM
kernels want (what ``torch.compile``'s CPU freezing pass does), with the
same arithmetic. What it pays differs by CPU (docs/benchmarks.md, "What
each part of the fast path pays": ``benchmark_backbone.py --ablate``).
:func:`packable_linear` is the one function that chooses: its caller says whether
packing may be used (``pack``: the module's
:func:`mmvisattn.ops.fast_path_allowed` and the ``'packed_linears'`` part,
as :class:`mmvisattn.models.layers.PackedLinear` asks), and it packs CPU
tensors of fp32 weights in fp32 without autocast, or in bf16 under CPU
bf16 autocast where oneDNN has native bf16 (the weight packed as bf16, the
input cast to bf16, the output bf16: what autocast's ``F.linear``
computes, without its per-call weight cast and reorder); everything else
takes ``F.linear``.

The packed copies live for one :func:`packed_weights_scope`, never longer:
weights can change between two forwards in ways no cheap key sees
(mmengine's ``EMAHook`` swaps them through ``.data``, which bumps no
version counter), a copy made under ``torch.inference_mode()`` must not
outlive it, and one module's copies at a time cost little memory. A
module that calls its linears many times in one forward (a chunk loop)
opens the scope around the loop, so each weight is packed once.
"""
import contextlib
import threading
from typing import Optional

import torch
import torch.nn.functional as F

# Packed weights of the running scope, per thread (id(weight) -> (key,
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
    """Cache packed weights for one module's forward: each weight is
    packed on its first call inside it (a chunk loop calls the same linear
    many times) and every copy is dropped at the end. Nested scopes share
    the outermost one."""
    if getattr(_LOCAL, 'packed', None) is not None:
        yield
        return
    _LOCAL.packed = {}
    try:
        yield
    finally:
        _LOCAL.packed = None


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


def _packed_dtype(x: torch.Tensor, weight: torch.Tensor):
    """The dtype the packed GEMM runs in, or None (``F.linear``): what
    oneDNN's kernels take and whether packing pays."""
    if not (_ONEDNN and x.device.type == 'cpu'
            and weight.dtype == torch.float32):
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
    packed = getattr(_LOCAL, 'packed', None) or {}
    if id(weight) not in packed and \
            x.numel() < _MIN_PACK_ROWS[dtype] * x.shape[-1]:
        return None
    return dtype


def _packed_weight(weight: torch.Tensor, bias, dtype: torch.dtype):
    """(packed weight, bias) in ``dtype``, packed once per scope."""
    # within one forward too, an in-place update (_version) or a new
    # tensor (data_ptr) repacks
    key = (weight._version, weight.data_ptr(), dtype)
    packed = _LOCAL.packed
    cached = packed.get(id(weight))
    if cached is None or cached[0] != key:
        if bias is not None:
            bias = bias.detach().to(dtype)
        cached = (key, pack_weight(weight.detach().to(dtype), ROWS_HINT), bias)
        packed[id(weight)] = cached
    return cached[1], cached[2]


def packable_linear(x: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor] = None,
                    pack: bool = False,
                    gelu: Optional[str] = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``, then ``F.gelu(approximate=gelu)``
    where ``gelu`` names one (``'none'``, ``'tanh'``); with ``pack``, on
    oneDNN with the weight packed where the dtypes and the size make it pay
    (this module's doc), the GELU computed in the GEMM's epilogue, inside
    the open :func:`packed_weights_scope` or one of its own."""
    dtype = _packed_dtype(x, weight) if pack else None
    if dtype is None:
        out = F.linear(x, weight, bias)
        return out if gelu is None else F.gelu(out, approximate=gelu)
    with packed_weights_scope():
        packed, bias = _packed_weight(weight, bias, dtype)
        out = torch.ops.mkldnn._linear_pointwise(
            x.reshape(-1, x.shape[-1]).to(dtype), packed, bias,
            'none' if gelu is None else 'gelu', [],
            '' if gelu is None else gelu)
    return out.view(*x.shape[:-1], out.shape[-1])
