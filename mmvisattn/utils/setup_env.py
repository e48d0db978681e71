"""Import-time fixes that make the OpenMMLab 2.x stack work on current torch."""
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


def register_config_package():
    """Make ``_base_ = 'mmvisattn::<dir>/<config>.py'`` resolvable.

    mmengine resolves ``pkg::`` only for packages listed in its
    ``MODULE2PACKAGE`` table, and finds the package folder through
    ``pkg_resources`` as ``<distribution location>/<name>``. For a PEP 660
    editable install that is ``site-packages/mmvisattn``, which does not
    exist (the code stays in the checkout). So for our own package the
    folder is taken from the imported module itself; every other package
    goes through mmengine's lookup unchanged. The configs live in
    ``mmvisattn/.mim/configs``.
    """
    import os.path as osp

    import mmengine.config.config as mmengine_config
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault('mmvisattn', 'mmvisattn')
    lookup = mmengine_config.get_installed_path
    if getattr(lookup, '_mmvisattn', False):
        return
    here = osp.dirname(osp.dirname(osp.abspath(__file__)))

    def get_installed_path(package: str) -> str:
        return here if package == 'mmvisattn' else lookup(package)

    get_installed_path._mmvisattn = True
    mmengine_config.get_installed_path = get_installed_path
