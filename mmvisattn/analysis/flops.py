"""Building a config's model without weights, and counting it: what
``tools/analysis_tools/get_flops.py`` prints and other tools reuse."""
import copy
import importlib
from typing import Dict, Optional, Sequence, Tuple

from mmengine.config import Config
from mmengine.registry import DefaultScope

from mmvisattn.analysis.complexity import model_complexity
from mmvisattn.cli import config_scope

DETECTION_SHAPE = (800, 1280)  # H, W: the paper's "1280x800"
SEGMENTATION_SHAPE = (512, 2048)  # Table 3


def strip_pretrained(node):
    """``init_cfg=None`` wherever weights would be loaded, ``pretrained``
    keys dropped: building the model never touches the network."""
    if isinstance(node, dict):
        for key in list(node.keys()):
            value = node[key]
            if key == 'init_cfg' and _loads_weights(value):
                node[key] = None
            elif key == 'pretrained' and isinstance(value, str):
                node[key] = None
            else:
                strip_pretrained(value)
    elif isinstance(node, (list, tuple)):
        for item in node:
            strip_pretrained(item)


def _loads_weights(init_cfg) -> bool:
    items = init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]
    return any(isinstance(i, dict) and i.get('type') == 'Pretrained'
               or isinstance(i, dict) and 'checkpoint' in i for i in items)


def load_config(path: str, cfg_options: Optional[dict] = None) -> Config:
    cfg = Config.fromfile(path)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    return cfg


def build_model(cfg: Config):
    """The config's model, built in its ``default_scope``'s registry (the
    global default scope is left as it was) with no weights loaded:
    pretrained ``init_cfg``s are dropped and ``init_weights`` is never
    called. Returns ``(model, scope)``."""
    scope = config_scope(cfg, cfg.filename)
    model_cfg = copy.deepcopy(cfg.model)
    strip_pretrained(model_cfg)
    registry = importlib.import_module(f'{scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(scope):
        return registry.build(model_cfg), scope


def classification_shape(cfg: Config) -> Tuple[int, int]:
    """The classifier's evaluation input: the test pipeline's crop or
    resize (224, or 384 for the 384px configs)."""
    for step in cfg.get('test_dataloader', {}).get('dataset', {}).get(
            'pipeline', []):
        size = step.get('crop_size') if step['type'] == 'CenterCrop' \
            else step.get('scale') if step['type'] == 'Resize' else None
        if size:
            size = size if isinstance(size, (list, tuple)) else (size, size)
            return tuple(size)
    return (224, 224)


def segmentation_shape(cfg: Config) -> Tuple[int, int]:
    """The paper's segmentation input: 512x2048 for 512x512 crops, and in
    general H x 4H for HxH crops (640x2560 for the 640x640 models of Table
    3, whose FLOPs are counted at that scale)."""
    crop = cfg.get('crop_size')
    if not crop:
        return SEGMENTATION_SHAPE
    return (crop[0], 4 * crop[0])


def count_config(path: str,
                 shape: Optional[Sequence[int]] = None,
                 convention: str = 'paper',
                 cfg_options: Optional[dict] = None) -> Dict:
    """Build ``path``'s model and count it at ``shape`` (H, W)."""
    cfg = load_config(path, cfg_options)
    model, scope = build_model(cfg)
    if shape is None:
        shape = segmentation_shape(cfg) if scope == 'mmseg' else \
            classification_shape(cfg) if scope == 'mmpretrain' else \
            DETECTION_SHAPE
    with DefaultScope.overwrite_default_scope(scope):
        result = model_complexity(model, (3, *shape), convention)
    result.update(shape=tuple(shape), scope=scope)
    return result
