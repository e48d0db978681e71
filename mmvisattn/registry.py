"""MMEngine registries of mmvisattn.

``MODELS`` is a child of MMEngine's root registry with scope ``mmvisattn``, so a
config in mmdet's or mmseg's scope reaches our modules as
``type='mmvisattn.SwinTransformer'`` once ``mmvisattn`` is imported (for example
through ``custom_imports=dict(imports=['mmvisattn'])``).
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import \
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import TASK_UTILS as MMENGINE_TASK_UTILS
from mmengine.registry import Registry

MODELS = Registry(
    'model',
    parent=MMENGINE_MODELS,
    scope='mmvisattn',
    # the detection/segmentation parts import mmdet/mmseg models (seconds):
    # registered on first use
    locations=[
        'mmvisattn.models', 'mmvisattn.models.dense_heads',
        'mmvisattn.models.detectors', 'mmvisattn.models.losses',
        'mmvisattn.models.necks', 'mmvisattn.models.plugins', 'mmvisattn.models.decode_heads'
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
