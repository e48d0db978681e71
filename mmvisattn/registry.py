"""MMEngine registries of mmvisattn.

``MODELS`` is a child of MMEngine's root registry with scope ``mmvisattn``, so a
config in mmdet's or mmseg's scope reaches our modules as
``type='mmvisattn.SwinTransformer'`` once ``mmvisattn`` is imported (for example
through ``custom_imports=dict(imports=['mmvisattn'])``).
"""
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import Registry

MODELS = Registry(
    'model',
    parent=MMENGINE_MODELS,
    scope='mmvisattn',
    locations=['mmvisattn.models'])

MODEL_WRAPPERS = Registry(
    'model_wrapper',
    parent=MMENGINE_MODEL_WRAPPERS,
    scope='mmvisattn',
    locations=['mmvisattn.utils.cpu_distributed'])
