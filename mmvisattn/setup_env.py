"""Every change ``mmvisattn`` makes to other libraries, in one place.

``import mmvisattn`` runs :func:`setup_env` once; each step is idempotent.

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
   ``is_installed`` are replaced by versions that find a package through
   importlib: mmengine's go through ``pkg_resources`` (deprecated, a warning
   on every command) and point an editable install at a ``site-packages``
   folder that does not exist.

Not at import, but also global, and applied where it is needed:

3. instaboostfast's ``binary_mask_to_polygon`` (:func:`patch_instaboostfast`,
   called when ``mmvisattn.InstaBoost`` is built): its only release breaks
   on numpy>=1.24 (see ``mmvisattn/datasets/transforms.py``).

4. mmcv's compiled ops under bf16 autocast (:func:`run_mmcv_ops_in_fp32_under_bf16`,
   called when bf16 mixed precision is switched on: ``BF16OptimWrapper``,
   ``tools/train.py --amp`` without a GPU or with ``--amp-dtype bfloat16``,
   ``tools/test.py --amp``): mmcv's kernels (NMS, RoIAlign, deformable
   convs, ...) have no bf16 version ("not implemented for 'BFloat16'"),
   so each of mmcv's autograd functions runs in fp32 while a bf16 autocast
   is active, as autocast itself does for ops on its fp32 list. fp16 and
   no autocast are untouched.

Nothing else: registries are children of mmengine's (``mmvisattn/registry.py``)
and add no entries to other libraries' registries; training hooks are named
in the configs or added visibly by ``tools/train.py``.
"""
import functools
import importlib.metadata
import importlib.util
import pickle

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


def register_config_package():
    """Make ``_base_ = 'mmvisattn::<dir>/<config>.py'`` resolvable, and
    resolve every ``pkg::`` through importlib.

    mmengine resolves ``pkg::`` only for packages listed in its
    ``MODULE2PACKAGE`` table, and finds the package folder through
    ``pkg_resources`` as ``<distribution location>/<name>``. For a PEP 660
    editable install that is ``site-packages/mmvisattn``, which does not
    exist (the code stays in the checkout), and importing ``pkg_resources``
    prints a deprecation warning on every command. The folder of the
    imported module is the one mmengine means for every installed package.
    The configs live in ``mmvisattn/.mim/configs``.
    """
    import mmengine.config.config as mmengine_config
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault('mmvisattn', 'mmvisattn')
    mmengine_config.get_installed_path = _package_folder
    mmengine_config.is_installed = _is_installed


def _binary_mask_to_polygon(binary_mask, tolerance=0):
    """instaboostfast's ``binary_mask_to_polygon``, one contour at a time."""
    from instaboostfast.pycococreater import close_contour
    from skimage import measure
    padded = np.pad(binary_mask, pad_width=1, mode='constant',
                    constant_values=0)
    polygons = []
    for contour in measure.find_contours(padded, 0.5):
        contour = close_contour(np.subtract(contour, 1))
        contour = measure.approximate_polygon(contour, tolerance)
        if len(contour) < 3:
            continue
        segmentation = np.flip(contour, axis=1).ravel().tolist()
        # padding then subtracting 1 can leave -0.5 coordinates
        polygons.append([max(0, v) for v in segmentation])
    return polygons


def patch_instaboostfast():
    """Swap the fixed function into instaboostfast (idempotent)."""
    import instaboostfast.affine_transform as affine_transform
    import instaboostfast.pycococreater as pycococreater
    for module in (pycococreater, affine_transform):
        module.binary_mask_to_polygon = _binary_mask_to_polygon


def setup_env():
    """The import-time changes listed in this module's docstring."""
    register_safe_globals()
    register_config_package()


def _bf16_to_fp32(values):
    return [v.float() if isinstance(v, torch.Tensor)
            and v.dtype == torch.bfloat16 else v for v in values]


def _fp32_under_bf16_autocast(forward):
    """``forward`` of an autograd function, run with fp32 inputs and
    autocast off while a bf16 autocast is active on the CPU or CUDA; its
    floating outputs return in bf16 (the dtype the surrounding code
    allocates for them, e.g. mmdet's RoI extractor)."""

    @functools.wraps(forward)
    def wrapped(ctx, *args, **kwargs):
        for device in ('cpu', 'cuda'):
            if (torch.is_autocast_enabled(device)
                    and torch.get_autocast_dtype(device) == torch.bfloat16):
                ctx.fp32_under_bf16 = True
                with torch.autocast(device, enabled=False):
                    out = forward(ctx, *_bf16_to_fp32(args), **kwargs)
                if isinstance(out, torch.Tensor):
                    return _to_bf16(out)
                if isinstance(out, tuple):
                    return tuple(_to_bf16(o) for o in out)
                return out
        return forward(ctx, *args, **kwargs)

    wrapped._fp32_under_bf16 = True
    return wrapped


def _to_bf16(value):
    return value.bfloat16() if isinstance(value, torch.Tensor) and \
        value.dtype == torch.float32 else value


def _fp32_grads(backward):
    """The matching ``backward``: bf16 incoming gradients to fp32 (the
    kernels' dtype); autograd casts the returned ones to the inputs'."""

    @functools.wraps(backward)
    def wrapped(ctx, *grads):
        if getattr(ctx, 'fp32_under_bf16', False):
            grads = _bf16_to_fp32(grads)
        return backward(ctx, *grads)

    wrapped._fp32_under_bf16 = True
    return wrapped


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def run_mmcv_ops_in_fp32_under_bf16():
    """Wrap the ``forward`` of every autograd function in ``mmcv.ops``
    (idempotent; see item 4 of this module's docstring)."""
    import mmcv.ops  # noqa: F401  (defines the functions)
    for fn in set(_subclasses(torch.autograd.Function)):
        if not fn.__module__.startswith('mmcv.ops'):
            continue
        forward = fn.__dict__.get('forward')
        if forward is None or getattr(forward, '_fp32_under_bf16', False):
            continue
        fn.forward = staticmethod(_fp32_under_bf16_autocast(
            forward.__func__ if isinstance(forward, staticmethod)
            else forward))
        backward = fn.__dict__.get('backward')
        if backward is not None:
            fn.backward = staticmethod(_fp32_grads(
                backward.__func__ if isinstance(backward, staticmethod)
                else backward))
