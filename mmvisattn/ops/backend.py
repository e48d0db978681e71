"""Which implementation a block runs: the one place that decides.

Blocks have two implementations of the same arithmetic:

* ``'plain'``: differentiable PyTorch ops, correct in every mode;
* ``'fast'``: the CPU inference path, made of named parts
  (:data:`FAST_PARTS`):

  - ``'packed_linears'``: linears on oneDNN with weights packed once per
    block call, GELU fused into fc1 (:mod:`.linear`);
  - ``'window_chunks'``: the window attention run a cache-sized chunk of
    windows at a time, each chunk's output scatter-added straight into
    the residual stream (``WindowAttention.add_to``);
  - ``'mlp_chunks'``: the MLP run a chunk of rows at a time, written in
    place.

  It rewrites tensors in place and skips dropout/DropPath, so it may run
  only when nothing can tell the difference.

:func:`fast_path_allowed` is that condition, asked once at each block's
entry (:func:`~.linear.fast_path` enters it); model code never reads a
flag of its own. :func:`use_backend` chooses for a region of code, as
NATTEN's context managers do: ``'auto'`` (default: fast where allowed) or
``'plain'`` (always the plain path, to compare or to debug), and
``without=`` switches parts of the fast path off, to measure what each
pays (``tools/analysis_tools/benchmark_backbone.py --ablate``). The choice
is a context variable, so it is scoped to the ``with`` block and to the
thread or task that entered it.
"""
import contextlib
import contextvars
from typing import Sequence

import torch
import torch.nn as nn

from .symbolic import recording

BACKENDS = ('auto', 'plain')
FAST_PARTS = ('packed_linears', 'window_chunks', 'mlp_chunks')
_BACKEND = contextvars.ContextVar('mmvisattn_backend', default='auto')
_WITHOUT = contextvars.ContextVar('mmvisattn_without', default=frozenset())


@contextlib.contextmanager
def use_backend(name: str, without: Sequence[str] = ()):
    """Run the enclosed code with backend ``name`` (one of BACKENDS), the
    fast path's parts ``without`` (of FAST_PARTS) switched off."""
    if name not in BACKENDS:
        raise ValueError(f'use_backend: {name!r}; choose from {BACKENDS}')
    unknown = sorted(set(without) - set(FAST_PARTS))
    if unknown:
        raise ValueError(f'use_backend: without={unknown}; the fast path\'s '
                         f'parts are {FAST_PARTS}')
    tokens = _BACKEND.set(name), _WITHOUT.set(frozenset(without))
    try:
        yield
    finally:
        _BACKEND.reset(tokens[0])
        _WITHOUT.reset(tokens[1])


def fast_part(name: str) -> bool:
    """Whether the fast path's part ``name`` is on (it runs only where
    :func:`fast_path_allowed` holds)."""
    return name not in _WITHOUT.get()


def current_backend() -> str:
    return _BACKEND.get()


def _exporting() -> bool:
    # torch.compile, torch.jit.trace/script and the ONNX exporters record
    # ops: they get the plain graph
    return recording()


def fast_path_allowed(module: nn.Module, x: torch.Tensor) -> bool:
    """Whether ``module`` (a block) may take its fast inference path on
    input ``x``. Every condition is a mode in which the in-place rewrite or
    the skipped dropout would change a result:

    * the backend is not ``'plain'`` (:func:`use_backend`);
    * ``module`` is in eval mode: dropout and DropPath are identities only
      there (``no_grad`` in train mode still drops);
    * no gradient is asked for: autograd off, or neither ``x`` nor any of
      the block's parameters requires one (a frozen stage);
    * no compiler, tracer or exporter is recording the graph;
    * ``x`` is on the CPU: the packing, the cache-sized chunks and the
      in-place writes were built and measured for CPU inference (on a GPU a
      chunk loop only adds kernel launches); GPUs run the plain path.

    Autocast and in-place weight swaps need no condition here: packed
    linears run in fp32 without autocast or in bf16 under CPU bf16 autocast
    (:func:`.linear.fast_linear` checks the tensors it gets), and packed
    weights live for one block call, so a swap between two calls is always
    seen.
    """
    if _BACKEND.get() == 'plain' or module.training or _exporting() or \
            x.device.type != 'cpu':
        return False
    if not torch.is_grad_enabled():
        return True
    return not x.requires_grad and not any(
        p.requires_grad for p in module.parameters())
