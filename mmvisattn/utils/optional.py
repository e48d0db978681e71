"""Dependencies that ``import mmvisattn`` and the backbones do without.

``import mmvisattn`` and building any backbone (Swin, TNT, RSWAtt) need
torch, mmengine and mmcv's Python part (``mmcv.cnn``) only: they work with
mmcv-lite (no compiled ops, ``mmcv._ext``) and without mmdet, mmseg or
mmpretrain. What needs one of these imports it where it is used, through
:func:`import_mmcv_ops` or :func:`missing_dependency`, and says what is
missing and what needs it (``tests/test_light_import.py``).
"""
from typing import Optional

# module -> what provides it
OPTIONAL_DEPENDENCIES = {
    'mmcv._ext': "mmcv's compiled ops (mmcv._ext; this mmcv has none, as "
                 'mmcv-lite or a build without ops): install the full mmcv, '
                 'e.g. `mim install mmcv`',
    'mmdet': 'mmdet (`mim install mmdet`)',
    'mmseg': 'mmsegmentation (`mim install mmsegmentation`)',
    'mmpretrain': 'mmpretrain (`mim install mmpretrain`)',
}


def missing_dependency(error: BaseException) -> Optional[str]:
    """The optional dependency whose absence raised ``error`` (a
    ``ModuleNotFoundError`` for it or one of its submodules), else None."""
    name = getattr(error, 'name', None) or ''
    if not isinstance(error, ModuleNotFoundError):
        return None
    for module in OPTIONAL_DEPENDENCIES:
        if name == module or name.startswith(module + '.'):
            return module
    return None


def missing_message(module: str, what: str) -> str:
    return f'{what} needs {OPTIONAL_DEPENDENCIES[module]}'


def import_mmcv_ops(what: str):
    """``mmcv.ops``, or an ``ImportError`` saying that ``what`` needs
    mmcv's compiled ops."""
    try:
        import mmcv.ops
    except ModuleNotFoundError as error:
        if missing_dependency(error) is None:
            raise
        raise ImportError(missing_message('mmcv._ext', what)) from error
    return mmcv.ops


def mmcv_ops_available() -> bool:
    """Whether ``mmcv.ops`` imports (mmcv with its compiled ops)."""
    try:
        import_mmcv_ops('')
    except ImportError:
        return False
    return True
