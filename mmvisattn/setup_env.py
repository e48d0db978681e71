"""Every change ``mmvisattn`` makes to other libraries, in one place.

At import (``import mmvisattn`` runs :func:`setup_env` once; each step is
idempotent):

1. ``torch.serialization.add_safe_globals`` (:func:`register_safe_globals`):
   torch>=2.6 loads with ``weights_only=True``, and mmengine 0.10.x
   checkpoints pickle numpy scalars/arrays and ``HistoryBuffer``; without
   the allow-list ``resume``, ``load_from`` and ``init_cfg=Pretrained`` fail
   with "Unsupported global". Only those types are allowed (and a
   ``getattr`` restricted to ``HistoryBuffer``'s methods), so the safe
   loader stays on.
2. mmengine's ``pkg::`` config lookup (:func:`register_config_package`):
   ``MODULE2PACKAGE['mmvisattn']`` is added so ``mmvisattn::`` configs
   resolve, and ``mmengine.config.config.get_installed_path`` /
   ``is_installed`` (the names mmengine's ``Config`` calls; not
   ``mmengine.utils``'s) are wrapped to answer through importlib (the
   folder of the imported module) for ``mmvisattn`` alone, whose editable
   install mmengine's rule cannot find; every other package gets
   mmengine's own function, unchanged.

Not at import: only inside the scope that needs it.

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

Nothing else: registries are children of mmengine's (``mmvisattn/registry.py``)
and add no entries to other libraries' registries; training hooks are named
in the configs or added visibly by ``tools/train.py``.
"""
import contextlib
import functools
import importlib.metadata
import importlib.util
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


def register_safe_globals():
    """Let ``torch.load(weights_only=True)`` read full mmengine checkpoints.

    torch>=2.6 loads with ``weights_only=True`` by default. mmengine (0.10.x)
    does not pass ``weights_only`` and its checkpoints pickle numpy scalars and
    arrays (in ``meta`` and the message hub) and ``HistoryBuffer`` objects, so
    ``resume``, ``load_from`` and ``init_cfg=dict(type='Pretrained')`` failed
    with ``Unsupported global``. Allow-listing exactly these types (and a
    getattr restricted to ``HistoryBuffer``'s methods) keeps the safe loader
    on, instead of switching it off for every file.
    """
    add = getattr(torch.serialization, 'add_safe_globals', None)
    if add is None:  # torch<2.4: full unpickling is the default anyway
        return
    from mmengine.logging import HistoryBuffer
    add([HistoryBuffer, *_numpy_pickle_globals(),
         (_history_buffer_getattr, 'builtins.getattr')])


def _top_level_module(package: str) -> str:
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return package
    names = (dist.read_text('top_level.txt') or '').split()
    return names[0] if names else package


def _package_folder(package: str) -> str:
    """Folder of an importable package, through importlib (no
    ``pkg_resources``); a distribution name (``mmsegmentation``) maps to its
    top-level module (``mmseg``) as in mmengine."""
    for module in dict.fromkeys((package, _top_level_module(package))):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            return list(spec.submodule_search_locations)[0]
    raise ModuleNotFoundError(f'{package} is not installed')


def _is_installed(package: str) -> bool:
    try:
        _package_folder(package)
    except ModuleNotFoundError:
        return False
    return True


def uses_importlib_lookup(package: str) -> bool:
    """Whether mmengine's config lookup of ``package`` goes through
    :func:`_package_folder` (importlib): for ``mmvisattn`` only."""
    return package == 'mmvisattn'


def _scoped_lookup(ours, mmengine_lookup):
    """``ours`` for ``mmvisattn``, ``mmengine_lookup`` (unchanged, called
    as it is) for every other package."""

    @functools.wraps(mmengine_lookup)
    def lookup(package):
        if uses_importlib_lookup(package):
            return ours(package)
        return mmengine_lookup(package)

    lookup.mmengine_lookup = mmengine_lookup
    return lookup


def register_config_package():
    """Make ``_base_ = 'mmvisattn::<dir>/<config>.py'`` resolvable.

    Why the two lookups are wrapped, and only for ``mmvisattn``: mmengine
    resolves ``pkg::`` only for packages listed in its ``MODULE2PACKAGE``
    table, and finds the package folder through ``pkg_resources`` as
    ``<distribution location>/<name>``. For a PEP 660 editable install
    (``pip install -e .``, this project's own way) that is
    ``site-packages/mmvisattn``, which does not exist (the code stays in
    the checkout), and mmengine has no hook to say otherwise. So
    ``mmengine.config.config``'s ``get_installed_path`` and
    ``is_installed`` (the names its ``Config`` calls) become
    :func:`_scoped_lookup` wrappers that answer through importlib (the
    folder of the imported module) for ``mmvisattn`` and call mmengine's
    own function, unchanged, for every other package (idempotent). The
    configs live in ``mmvisattn/.mim/configs``.
    """
    import mmengine.config.config as mmengine_config
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault('mmvisattn', 'mmvisattn')
    for name, ours in (('get_installed_path', _package_folder),
                       ('is_installed', _is_installed)):
        current = getattr(mmengine_config, name)
        if not hasattr(current, 'mmengine_lookup'):
            setattr(mmengine_config, name, _scoped_lookup(ours, current))


def setup_env():
    """The import-time changes listed in this module's docstring."""
    register_safe_globals()
    register_config_package()


# 4. mmcv's compiled ops under a bf16 autocast


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
