"""Which implementation a module runs: the one place that decides.

Three leaf modules have a second implementation of the same arithmetic
for CPU inference beside their plain, differentiable one, in four named
parts (:data:`FAST_PARTS`), each behind its module's own ``forward``, so
that the blocks read like the paper and forward hooks fire on every path:

* ``'packed_linears'``: :class:`~mmvisattn.models.layers.PackedLinear`,
  an ``nn.Linear`` on oneDNN with its weight packed (:mod:`.linear`);
* ``'window_chunks'``: :class:`~mmvisattn.models.layers.WindowAttention`
  attends a cache-sized chunk of windows at a time and scatters it to its
  image tokens while it is in cache;
* ``'mlp_chunks'``: :class:`~mmvisattn.models.layers.Mlp` runs a chunk of
  rows at a time, each chunk's 4C-wide hidden state kept in cache and the
  block's residual added to its rows there;
* ``'fused_gelu'``: :class:`~mmvisattn.models.layers.Mlp` computes its
  GELU in fc1's packed GEMM. That skips the calls of fc1 and of the GELU
  module, so it runs only where no hook observes them (:func:`observed`).

A part may run only when nothing can tell the difference:
:func:`fast_part_allowed` is that condition (:func:`fast_path_allowed`,
the mode, and the part switched on), asked by the module at each call.
:func:`use_backend` chooses for a region of code, as NATTEN's context
managers do: ``'auto'`` (default: every part where allowed) or
``'plain'`` (always the plain path, to compare or to debug), and
``without=`` switches parts off, to measure what each pays
(``tools/analysis_tools/benchmark_backbone.py --ablate``). The choice is a
context variable, so it is scoped to the ``with`` block and to the thread
or task that entered it.
"""
import contextlib
import contextvars
from typing import Sequence

import torch
import torch.nn as nn

from .symbolic import recording

BACKENDS = ('auto', 'plain')
FAST_PARTS = ('packed_linears', 'window_chunks', 'mlp_chunks', 'fused_gelu')
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


def fast_part_allowed(module: nn.Module, x: torch.Tensor, part: str) -> bool:
    """Whether ``module`` may run the fast path's part ``part`` on ``x``:
    the part is on and :func:`fast_path_allowed` holds."""
    return fast_part(part) and fast_path_allowed(module, x)


def observed(*modules: nn.Module) -> bool:
    """Whether a forward hook or pre-hook would see a call of any of
    ``modules``: one registered on the module, or a global one
    (``torch.nn.modules.module.register_module_forward_hook``). A part
    that computes a module's arithmetic without calling it runs only where
    this is False, so no hook can tell the difference."""
    # torch keeps the global hooks in these module-level dicts (what
    # Module._call_impl reads); there is no public getter
    from torch.nn.modules import module as torch_module
    if torch_module._global_forward_hooks or \
            torch_module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def _exporting() -> bool:
    # torch.compile, torch.jit.trace/script and the ONNX exporters record
    # ops: they get the plain graph
    return recording()


def fast_path_allowed(module: nn.Module, x: torch.Tensor) -> bool:
    """Whether ``module`` may take its fast inference path on input ``x``.
    Every condition is a mode in which a chunk loop or a packed weight
    could change a result:

    * the backend is not ``'plain'`` (:func:`use_backend`);
    * ``module`` is in eval mode: dropout and DropPath are identities only
      there (``no_grad`` in train mode still drops);
    * no gradient is asked for: autograd off, or neither ``x`` nor any of
      the module's parameters requires one (a frozen stage);
    * no compiler, tracer or exporter is recording the graph;
    * ``x`` is on the CPU: the packing and the cache-sized chunks were
      built and measured for CPU inference (on a GPU a chunk loop only adds
      kernel launches); GPUs run the plain path.

    Autocast and in-place weight swaps need no condition here: packed
    linears run in fp32 without autocast or in bf16 under CPU bf16 autocast
    (:func:`.linear.packable_linear` checks the tensors it gets), and packed
    weights live for one module call, so a swap between two calls is always
    seen.
    """
    if _BACKEND.get() == 'plain' or module.training or _exporting() or \
            x.device.type != 'cpu':
        return False
    if not torch.is_grad_enabled():
        return True
    return not x.requires_grad and not any(
        p.requires_grad for p in module.parameters())
