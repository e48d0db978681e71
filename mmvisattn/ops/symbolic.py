"""Sizes that a tracer or exporter records: what kernels need to know to
stay correct when a map's height and width are graph values, not Python
ints.

When a graph is recorded, a tensor's sizes are not always ``int``:

* ``torch.jit.trace`` and the TorchScript ONNX exporter
  (``torch.onnx.export(..., dynamo=False)``) give 0-dim ``Tensor`` sizes
  and record the arithmetic done on them;
* ``torch.export`` (``dynamo=True``) and ``torch.compile`` give
  ``SymInt`` sizes when a dimension is dynamic (plain ints when static).

Three rules follow, and every kernel of :mod:`mmvisattn.ops` keeps them on
its path for such sizes (:func:`is_concrete` says which path):

1. No Python decision on a size: an ``if`` or a ``range()`` over a traced
   size is baked into the graph, silently wrong at another size. Kernels
   take a branch-free form instead (always pad, by an amount that may be
   0; one batched call instead of chunk loops).
2. No ``-(-a // b)`` for a ceiling: the TorchScript exporter writes
   ``aten::floor_divide`` as a *truncating* ONNX ``Div``, so
   ``-(-7 // 9)`` becomes 0, not 1 (a zero-sized tensor; the exporter's
   shape inference then divides by zero and the process dies with a
   floating point exception). :func:`ceil_div` keeps every operand
   non-negative, where truncation and floor agree.
3. No in-place writes into slices (index_put with a size-dependent,
   possibly empty slice): shape-derived index and mask tensors are built
   by arithmetic on ``arange`` (comparisons, ``where``), which every
   exporter records exactly and which stays valid at every size.

Shape-derived tensors are cached (:mod:`.cache`) only for concrete sizes
and only when nothing is being recorded.
"""
import torch


def recording() -> bool:
    """Whether a compiler, tracer or exporter is recording the graph:
    ``torch.compile``/``torch.export``, ``torch.jit.trace``/``script`` or
    either ONNX exporter."""
    return (torch.compiler.is_compiling() or torch.jit.is_tracing()
            or torch.jit.is_scripting() or torch.onnx.is_in_onnx_export())


def is_concrete(*sizes) -> bool:
    """True when every size is a plain Python int (eager mode, or a static
    dimension under ``torch.export``/``torch.compile``); False for a traced
    0-dim tensor or a ``SymInt``."""
    return all(type(s) is int for s in sizes)


def ceil_div(a, b):
    """ceil(a / b) for a >= 0, b > 0 (ints, traced tensors or SymInts),
    written so that truncating and flooring division agree (see rule 2 of
    the module doc)."""
    return (a + b - 1) // b


def size_tensor(size, device=None) -> torch.Tensor:
    """A size as a 0-dim int64 tensor on ``device`` (the traced value itself
    under the TorchScript tracer), for branch-free arithmetic with it."""
    if isinstance(size, torch.Tensor):
        return size.to(device=device, dtype=torch.long)
    return torch.scalar_tensor(size, dtype=torch.long, device=device)
