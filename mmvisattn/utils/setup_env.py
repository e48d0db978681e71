"""Import-time fixes that make the OpenMMLab 2.x stack work on current torch."""
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


def register_safe_globals():
    """Let ``torch.load(weights_only=True)`` read full mmengine checkpoints.

    torch>=2.6 loads with ``weights_only=True`` by default. mmengine (0.10.x)
    does not pass ``weights_only`` and its checkpoints pickle numpy scalars and
    arrays (in ``meta`` and the message hub) and ``HistoryBuffer`` objects, so
    ``resume``, ``load_from`` and ``init_cfg=dict(type='Pretrained')`` failed
    with ``Unsupported global``. Allow-listing exactly these types keeps the
    safe loader on, instead of switching it off for every file.
    """
    add = getattr(torch.serialization, 'add_safe_globals', None)
    if add is None:  # torch<2.4: full unpickling is the default anyway
        return
    from mmengine.logging import HistoryBuffer
    add([HistoryBuffer, *_numpy_pickle_globals()])


def register_config_package():
    """Make ``_base_ = 'mmvisattn::<dir>/<config>.py'`` resolvable.

    mmengine resolves ``pkg::`` only for packages listed in its
    ``MODULE2PACKAGE`` table; the configs live in ``mmvisattn/.mim/configs``.
    """
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault('mmvisattn', 'mmvisattn')
