"""MMEngine registries of mmvisattn.

``MODELS`` is a child of MMEngine's root registry with scope ``mmvisattn``, so a
config in mmdet's or mmseg's scope reaches our modules as
``type='mmvisattn.SwinTransformer'`` once ``mmvisattn`` is imported (for example
through ``custom_imports=dict(imports=['mmvisattn'])``).

Each registry imports its ``locations`` on first use (mmengine's lazy
registration). ``MODELS``'s detection and segmentation parts import
mmdet/mmseg models (seconds) and some need mmcv's compiled ops: they are
imported only for a name the backbones' module does not register, and
skipped where a dependency is missing (mmcv-lite, no mmdet); a name the
registry then lacks raises an error saying which parts could not be
imported and why (:class:`_Registry`, ``mmvisattn/utils/optional.py``).
"""
import logging
from importlib import import_module
from typing import Dict, Optional, Sequence, Type

from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import (
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
)
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import TASK_UTILS as MMENGINE_TASK_UTILS
from mmengine.registry import Registry

from mmvisattn.utils.optional import OPTIONAL_DEPENDENCIES, missing_dependency


class _Registry(Registry):
    """An mmengine ``Registry`` with ``optional_locations``: imported only
    when a name is not found in the (required) ``locations`` or the whole
    registry is listed, and skipped when an optional dependency of theirs
    is missing (mmcv-lite, no mmdet, mmseg or mmpretrain; any other import
    error propagates). A name not found then raises an ``ImportError``
    naming the parts that were skipped and what they need."""

    def __init__(self, *args, optional_locations: Sequence[str] = (),
                 **kwargs):
        super().__init__(*args, **kwargs)
        self._optional_locations = list(optional_locations)
        self._required_imported = False
        self._skipped: Dict[str, str] = {}  # location -> missing module

    def _import_required(self) -> None:
        if not self._required_imported:
            for location in self._locations:
                import_module(location)
            self._required_imported = True

    def import_from_location(self) -> None:
        if self._imported:
            return
        super().import_from_location()  # the required locations
        from mmengine.logging import print_log
        for location in self._optional_locations:
            try:
                import_module(location)
            except ModuleNotFoundError as error:
                missing = missing_dependency(error)
                if missing is None:
                    self._imported = False  # as mmengine: retried next time
                    raise
                self._skipped[location] = missing
                print_log(f'{location} not registered: it needs '
                          f'{OPTIONAL_DEPENDENCIES[missing]}',
                          logger='current', level=logging.DEBUG)

    def get(self, key: str) -> Optional[Type]:
        scope, real_key = self.split_scope_key(key)
        if scope in (None, self._scope) and not self._imported:
            # a backbone needs no detection/segmentation part (nor mmdet,
            # mmseg): the others are imported for names not found here
            self._import_required()
            if real_key in self._module_dict:
                return self._module_dict[real_key]
        found = super().get(key)
        if found is None and self._skipped:
            needs: Dict[str, list] = {}
            for location, missing in self._skipped.items():
                needs.setdefault(missing, []).append(location)
            parts = '; '.join(
                f'{", ".join(locations)} need{"s" * (len(locations) == 1)} '
                f'{OPTIONAL_DEPENDENCIES[missing]}'
                for missing, locations in needs.items())
            raise ImportError(
                f'{key!r} is not in mmvisattn\'s {self.name} registry, and '
                f'parts of it could not be imported: {parts}')
        return found


MODELS = _Registry(
    'model',
    parent=MMENGINE_MODELS,
    scope='mmvisattn',
    locations=['mmvisattn.models'],
    # the detection/segmentation parts import mmdet/mmseg models (seconds)
    # and some need mmcv's compiled ops: registered on first use, skipped
    # where a dependency is missing
    optional_locations=[
        'mmvisattn.models.dense_heads', 'mmvisattn.models.detectors',
        'mmvisattn.models.losses', 'mmvisattn.models.necks',
        'mmvisattn.models.plugins', 'mmvisattn.models.decode_heads',
        'mmvisattn.models.test_time_augs'
    ])

# Assigners and target builders of our heads (mmdet's TASK_UTILS reaches them
# as ``type='mmvisattn.CornerTargetAssigner'``).
TASK_UTILS = Registry(
    'task util',
    parent=MMENGINE_TASK_UTILS,
    scope='mmvisattn',
    locations=['mmvisattn.models.task_modules'])

MODEL_WRAPPERS = Registry(
    'model_wrapper',
    parent=MMENGINE_MODEL_WRAPPERS,
    scope='mmvisattn',
    locations=['mmvisattn.engine'])

# Optimizer-wrapper constructors (layer-wise lr decay), reached from mmdet's
# or mmseg's scope as
# ``constructor='mmvisattn.LayerDecayOptimWrapperConstructor'``.
OPTIM_WRAPPER_CONSTRUCTORS = Registry(
    'optimizer wrapper constructor',
    parent=MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
    scope='mmvisattn',
    locations=['mmvisattn.engine'])

# Optimizer wrappers (bf16 mixed precision without a loss scaler, on the CPU
# too), reached as ``optim_wrapper=dict(type='mmvisattn.BF16OptimWrapper')``.
OPTIM_WRAPPERS = Registry(
    'optim_wrapper',
    parent=MMENGINE_OPTIM_WRAPPERS,
    scope='mmvisattn',
    locations=['mmvisattn.engine'])

# Fault-tolerance and logging hooks (mmvisattn/engine/hooks.py), reached as
# ``type='mmvisattn.AtomicCheckpointHook'``.
HOOKS = Registry(
    'hook',
    parent=MMENGINE_HOOKS,
    scope='mmvisattn',
    locations=['mmvisattn.engine'])
