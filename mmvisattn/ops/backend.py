"""Which implementation a block runs: the one place that decides.

Blocks have two implementations of the same arithmetic:

* ``'plain'``: differentiable PyTorch ops, correct in every mode;
* ``'fast'``: the CPU inference path: linears on oneDNN with weights
  packed once per block call (:mod:`.linear`), the window attention's
  output scatter-added straight into the residual stream, the MLP written
  chunk by chunk in place. It rewrites tensors in place and skips
  dropout/DropPath, so it may run only when nothing can tell the
  difference.

:func:`fast_path_allowed` is that condition, asked once at each block's
entry; model code never reads a flag of its own. :func:`use_backend`
chooses for a region of code, as NATTEN's context managers do: ``'auto'``
(default: fast where allowed) or ``'plain'`` (always the plain path, to
compare or to debug). The choice is a context variable, so it is scoped to
the ``with`` block and to the thread or task that entered it.
"""
import contextlib
import contextvars

import torch
import torch.nn as nn

from .symbolic import recording

BACKENDS = ('auto', 'plain')
_BACKEND = contextvars.ContextVar('mmvisattn_backend', default='auto')


@contextlib.contextmanager
def use_backend(name: str):
    """Run the enclosed code with backend ``name`` (one of BACKENDS)."""
    if name not in BACKENDS:
        raise ValueError(f'use_backend: {name!r}; choose from {BACKENDS}')
    token = _BACKEND.set(name)
    try:
        yield
    finally:
        _BACKEND.reset(token)


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
    * no compiler, tracer or exporter is recording the graph.

    Autocast and in-place weight swaps need no condition here: packed
    linears run in fp32 without autocast or in bf16 under CPU bf16 autocast
    (:func:`.linear.fast_linear` checks the tensors it gets), and packed
    weights live for one block call, so a swap between two calls is always
    seen.
    """
    if _BACKEND.get() == 'plain' or module.training or _exporting():
        return False
    if not torch.is_grad_enabled():
        return True
    return not x.requires_grad and not any(
        p.requires_grad for p in module.parameters())
