"""What mmvisattn's tools need from other libraries, each inside a scope.

Importing ``mmvisattn`` changes nothing in any other library
(``tests/test_import_identity.py`` records torch's safe-load allow-list,
mmengine's ``MODULE2PACKAGE`` and the identity of every function and class
of mmengine, mmcv, mmdet, mmseg and mmpretrain before and after). What a
tool needs it enters explicitly, for as long as it runs, and a user's own
script does the same with one public call, :func:`runtime`::

    import mmvisattn
    with mmvisattn.runtime():
        cfg = Config.fromfile('my_config.py')   # _base_ = 'mmvisattn::...'
        Runner.from_cfg(cfg).train()           # resume, load_from, Pretrained

Inside :func:`runtime`:

1. :func:`safe_checkpoint_loading`: torch>=2.6 loads with
   ``weights_only=True``, and mmengine 0.10.x checkpoints pickle numpy
   scalars/arrays and ``HistoryBuffer``; without these on the allow-list
   ``resume``, ``load_from`` and ``init_cfg=Pretrained`` fail with
   "Unsupported global". Only those types are allowed (and a ``getattr``
   restricted to ``HistoryBuffer``'s methods), so the safe loader stays on;
   torch's own ``safe_globals`` context puts its list back at the end.
2. :func:`config_package`: mmengine resolves ``pkg::`` configs only for the
   packages in its ``MODULE2PACKAGE`` table; ``'mmvisattn'`` is in it
   inside the scope and removed after. mmengine's own lookup then finds the
   package folder (``mmvisattn/.mim/configs``) of a regular install through
   the installed distribution, as it finds mmdet's. An editable install
   (``pip install -e .``, ``tools/install.sh``'s) keeps the code in the
   checkout and only a record in site-packages, where mmengine looks for a
   ``site-packages/mmvisattn`` folder that does not exist; for that case
   alone, and inside the scope alone, ``mmengine.config.config``'s
   ``get_installed_path`` answers this package's folder for ``mmvisattn``
   and is mmengine's own for every other package.

Entered by the scope that needs it, never by ``runtime``:

3. mmcv's compiled ops under a bf16 autocast
   (:func:`mmcv_ops_fp32_under_bf16`, a context): mmcv's kernels (NMS,
   RoIAlign, deformable convs, ...) have no bf16 version ("not implemented
   for 'BFloat16'"), so inside the context the ``forward`` and
   ``backward`` of every autograd function in ``mmcv.ops`` are wrapped to
   run in fp32 while a bf16 autocast is active (CPU or CUDA) and hand bf16
   back, as autocast itself does for the ops on its fp32 list; fp16 and no
   autocast reach the kernels unchanged. Entered by the wrappers a config
   or ``tools/train.py --amp`` names, ``mmvisattn.AmpOptimWrapper`` in
   bf16 and ``mmvisattn.BF16OptimWrapper`` (``mmvisattn/engine/amp.py``),
   in their ``optim_context`` and ``backward``, and by ``tools/test.py
   --amp`` around the test run. When the last context is left the
   original ``forward`` is put back, and the original ``backward`` as soon
   as no autograd node whose forward ran in fp32 is alive any more (its
   graph is freed: in mmengine's ``train_step``, when the step returns; a
   graph backpropagated after the context still gets fp32 gradients).
   Nothing is wrapped outside these scopes, and nothing at all without
   mmcv's compiled ops (mmcv-lite).

instaboostfast's fix is not here: it is applied when an
``mmvisattn.InstaBoost`` is built (``mmvisattn/datasets/transforms.py``).
Registries are children of mmengine's (``mmvisattn/registry.py``) and add
no entries to other libraries' registries; training hooks are named in the
configs or added visibly by ``tools/train.py``.
"""
import contextlib
import functools
import os
import pickle
import threading
import weakref
from contextlib import contextmanager

import numpy as np
import torch


def _numpy_pickle_globals():
    """The numpy objects a pickled array, scalar or dtype refers to."""
    core = getattr(np, '_core', None) or np.core  # numpy 2 renamed core
    found = [np.ndarray, np.dtype, core.multiarray._reconstruct,
             core.multiarray.scalar]
    dtypes = getattr(np, 'dtypes', None)  # numpy>=1.25 pickles dtypes by class
    if dtypes is not None:
        found += [getattr(dtypes, name) for name in dir(dtypes)
                  if name.endswith('DType')]
    return found


def _history_buffer_getattr(obj, name):
    """Stands in for ``builtins.getattr`` inside ``torch.load(weights_only=True)``.

    mmengine pickles ``HistoryBuffer``'s statistics methods (min, max, mean,
    current) as ``getattr(HistoryBuffer, 'min')``. Allow-listing ``getattr``
    itself would let a checkpoint reach any attribute of any allowed object;
    this resolves exactly the public methods of ``HistoryBuffer``.
    """
    from mmengine.logging import HistoryBuffer
    if obj is HistoryBuffer and not name.startswith('_') and callable(
            getattr(HistoryBuffer, name, None)):
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f'weights_only load: getattr({obj!r}, {name!r}) is not allowed')


def checkpoint_globals() -> list:
    """What mmengine checkpoints pickle beyond tensors, for torch's
    weights-only loader: ``HistoryBuffer``, numpy's arrays, scalars and
    dtypes, and a ``getattr`` limited to ``HistoryBuffer``'s methods."""
    from mmengine.logging import HistoryBuffer
    return [HistoryBuffer, *_numpy_pickle_globals(),
            (_history_buffer_getattr, 'builtins.getattr')]


@contextmanager
def safe_checkpoint_loading():
    """Inside: ``torch.load(weights_only=True)`` (torch>=2.6's default)
    reads full mmengine checkpoints (item 1 of this module's doc). The
    allow-list is put back exactly as it was at the end (what the user
    allowed before stays allowed)."""
    serialization = torch.serialization
    before = serialization.get_safe_globals()
    serialization.add_safe_globals(checkpoint_globals())
    try:
        yield
    finally:
        serialization.clear_safe_globals()
        serialization.add_safe_globals(before)


def _package_folder() -> str:
    """This package's folder, the one ``import mmvisattn`` found."""
    return os.path.dirname(os.path.abspath(__file__))


@contextmanager
def config_package():
    """Inside: ``_base_ = 'mmvisattn::<dir>/<config>.py'`` resolves
    (item 2 of this module's doc). Re-entrant: each change is undone by the
    scope that made it."""
    import mmengine.config.config as mmengine_config
    from mmengine.config.utils import MODULE2PACKAGE
    added = 'mmvisattn' not in MODULE2PACKAGE
    if added:
        MODULE2PACKAGE['mmvisattn'] = 'mmvisattn'
    mmengine_lookup = mmengine_config.get_installed_path
    lookup = _editable_lookup(mmengine_lookup)
    if lookup is not None:
        mmengine_config.get_installed_path = lookup
    try:
        yield
    finally:
        if lookup is not None:
            mmengine_config.get_installed_path = mmengine_lookup
        if added:
            MODULE2PACKAGE.pop('mmvisattn', None)


def _editable_lookup(mmengine_lookup):
    """None where mmengine's own lookup finds this package's folder (a
    regular install, a checkout on ``PYTHONPATH``); for an editable install
    (PEP 660: the distribution's record in site-packages, the code in the
    checkout, where mmengine's ``<location>/mmvisattn`` does not exist) a
    lookup that answers this folder for ``mmvisattn`` and calls mmengine's
    own for every other package."""
    try:
        found = mmengine_lookup('mmvisattn')
    except Exception:  # mmengine's errors differ by version
        found = None
    if found is not None and os.path.isdir(found):
        return None

    @functools.wraps(mmengine_lookup)
    def lookup(package):
        if package == 'mmvisattn':
            return _package_folder()
        return mmengine_lookup(package)

    return lookup


@contextmanager
def runtime():
    """What mmvisattn's tools run inside, for a user's own script too:
    :func:`safe_checkpoint_loading` and :func:`config_package` (this
    module's doc). Nothing stays changed after it."""
    with safe_checkpoint_loading(), config_package():
        yield


# 3. mmcv's compiled ops under a bf16 autocast


class _Fallback:
    """State of :func:`mmcv_ops_fp32_under_bf16`, one per process."""
    lock = threading.RLock()
    scopes = 0  # contexts entered and not left
    pending = 0  # live autograd nodes whose forward ran in fp32
    functions = None  # mmcv.ops's autograd functions, found once
    originals = {}  # (function, 'forward'|'backward') -> its own attribute
    wrapped = {'forward': False, 'backward': False}


def _bf16_to_fp32(values):
    return [v.float() if isinstance(v, torch.Tensor)
            and v.dtype == torch.bfloat16 else v for v in values]


def _to_bf16(value):
    return value.bfloat16() if isinstance(value, torch.Tensor) and \
        value.dtype == torch.float32 else value


def _node_released():
    with _Fallback.lock:
        _Fallback.pending -= 1
        if _Fallback.pending == 0 and _Fallback.scopes == 0:
            _swap('backward', False)


def _fp32_under_bf16_autocast(forward):
    """``forward`` of an autograd function, run with fp32 inputs and
    autocast off while a bf16 autocast is active on the CPU or CUDA; its
    floating outputs return in bf16 (the dtype the surrounding code
    allocates for them, e.g. mmdet's RoI extractor). The node is counted
    until it is freed: its backward needs :func:`_fp32_grads`."""

    @functools.wraps(forward)
    def wrapped(ctx, *args, **kwargs):
        for device in ('cpu', 'cuda'):
            if (torch.is_autocast_enabled(device)
                    and torch.get_autocast_dtype(device) == torch.bfloat16):
                ctx.fp32_under_bf16 = True
                with _Fallback.lock:
                    _Fallback.pending += 1
                try:
                    weakref.finalize(ctx, _node_released).atexit = False
                except TypeError:  # not weak-referenceable: stays counted,
                    pass  # the (inert) backward wrapper stays with it
                with torch.autocast(device, enabled=False):
                    out = forward(ctx, *_bf16_to_fp32(args), **kwargs)
                if isinstance(out, torch.Tensor):
                    return _to_bf16(out)
                if isinstance(out, tuple):
                    return tuple(_to_bf16(o) for o in out)
                return out
        return forward(ctx, *args, **kwargs)

    return wrapped


def _fp32_grads(backward):
    """The matching ``backward``: bf16 incoming gradients to fp32 (the
    kernels' dtype) for a node whose forward ran in fp32; autograd casts
    the returned ones to the inputs' dtype."""

    @functools.wraps(backward)
    def wrapped(ctx, *grads):
        if getattr(ctx, 'fp32_under_bf16', False):
            grads = _bf16_to_fp32(grads)
        return backward(ctx, *grads)

    return wrapped


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _mmcv_autograd_functions():
    """The autograd functions ``mmcv.ops`` defines (none where mmcv has no
    compiled ops: then none of them can run)."""
    if _Fallback.functions is None:
        from mmvisattn.utils.optional import mmcv_ops_available
        functions = []
        if mmcv_ops_available():
            functions = sorted(
                (fn for fn in set(_subclasses(torch.autograd.Function))
                 if fn.__module__.startswith('mmcv.ops')
                 and 'forward' in fn.__dict__),
                key=lambda fn: (fn.__module__, fn.__qualname__))
        _Fallback.functions = functions
    return _Fallback.functions


def _swap(kind, on):
    """Put the wrapped (``on``) or the original ``kind`` ('forward' or
    'backward') on every function; nothing if already so."""
    if _Fallback.wrapped[kind] == on:
        return
    _Fallback.wrapped[kind] = on
    wrap = _fp32_under_bf16_autocast if kind == 'forward' else _fp32_grads
    for fn in _mmcv_autograd_functions():
        key = (fn, kind)
        if on:
            original = fn.__dict__.get(kind)
            if original is None:
                continue
            _Fallback.originals[key] = original
            setattr(fn, kind, staticmethod(wrap(
                original.__func__ if isinstance(original, staticmethod)
                else original)))
        elif key in _Fallback.originals:
            setattr(fn, kind, _Fallback.originals.pop(key))


@contextmanager
def mmcv_ops_fp32_under_bf16():
    """Inside: every autograd function of ``mmcv.ops`` runs in fp32 while a
    bf16 autocast is active (see item 4 of this module's docstring).

    Re-entrant and reference-counted: the last context to leave puts the
    original ``forward`` back; the original ``backward`` comes back as
    soon as no autograd node whose forward ran in fp32 is alive any more
    (a graph built inside may be backpropagated after the context, and
    its nodes live until the graph's tensors are dropped). A no-op where
    mmcv has no compiled ops."""
    with _Fallback.lock:
        _Fallback.scopes += 1
        _swap('forward', True)
        _swap('backward', True)
    try:
        yield
    finally:
        with _Fallback.lock:
            _Fallback.scopes -= 1
            if _Fallback.scopes == 0:
                _swap('forward', False)
                if _Fallback.pending == 0:
                    _swap('backward', False)


def mmcv_ops_fp32_state() -> dict:
    """What :func:`mmcv_ops_fp32_under_bf16` has in place now: contexts
    entered, fp32 nodes alive, and whether the forwards / backwards are
    the wrapped ones."""
    with _Fallback.lock:
        return dict(scopes=_Fallback.scopes, pending=_Fallback.pending,
                    **_Fallback.wrapped)


def bf16_scope(optim_wrapper):
    """:func:`mmcv_ops_fp32_under_bf16` for an optimizer wrapper whose
    ``cast_dtype`` is bfloat16, else nothing."""
    if getattr(optim_wrapper, 'cast_dtype', None) == torch.bfloat16:
        return mmcv_ops_fp32_under_bf16()
    return contextlib.nullcontext()
