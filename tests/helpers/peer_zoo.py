"""The peers' zoo: every config that mmdet, mmseg and mmpretrain install
whose model's backbone is a class we replace, read through mmengine.

Reading all of the peers' ~2,500 configs through ``Config.fromfile`` takes
about a minute; a filter first keeps the files that can reach one of our
classes, and only those are read. A config names its backbone's type in
its own text or inherits it from a base, so the filter keeps every file
that names one of the types and, repeatedly, every file with a kept base
(the bases as mmengine reads them from ``_base_``; for a file whose bases
mmengine's reader cannot list, every file that names a kept file's stem).
It can keep too much, never too little.
"""
import copy
import glob
import importlib
import os.path as osp
from typing import Dict, List, NamedTuple, Optional

from mmengine.config import Config, ConfigDict

PEERS = ('mmdet', 'mmseg', 'mmpretrain')
# the peers' class -> ours (the only thing a user changes in a config)
REPLACED = {'SwinTransformer': 'mmvisattn.SwinTransformer',
            'SwinTransformerV2': 'mmvisattn.SwinTransformerV2',
            'TNT': 'mmvisattn.TNT'}


class ZooConfig(NamedTuple):
    package: str  # the peer that ships it
    name: str  # its path under the peer's configs folder
    model: Optional[ConfigDict]  # cfg.model; None: mmengine cannot read it
    error: Optional[str] = None  # why mmengine cannot read it


class ZooModel(NamedTuple):
    """One distinct model of the zoo and every config that builds it (the
    same model recurs with other data, schedules or checkpoints)."""
    package: str
    configs: List[str]
    model: ConfigDict  # the peers' models read options as attributes


def config_root(package: str) -> str:
    module = importlib.import_module(package)
    return osp.join(osp.dirname(module.__file__), '.mim', 'configs')


def _stem(path: str) -> str:
    return osp.splitext(osp.basename(path))[0]


def _bases(path: str) -> Optional[List[str]]:
    """The files ``path`` inherits from, as mmengine resolves ``_base_``;
    None where mmengine's reader cannot list them (a ``read_base()``
    config)."""
    try:
        names = Config._get_base_files(path)
        return [osp.normpath(Config._get_cfg_path(name, path)[0]
                             if '::' in name else
                             osp.join(osp.dirname(path), name))
                for name in names]
    except Exception:
        return None


def _candidates(root: str) -> List[str]:
    """Configs under ``root`` (its ``_base_`` folders aside) that can reach
    one of :data:`REPLACED` through their own text or their bases'."""
    paths = sorted(osp.normpath(p) for p in
                   glob.glob(osp.join(root, '**', '*.py'), recursive=True))
    texts, bases = {}, {}
    for path in paths:
        with open(path, encoding='utf-8') as f:
            texts[path] = f.read()
        bases[path] = _bases(path)
    kept = {p for p, text in texts.items()
            if any(name in text for name in REPLACED)}
    while True:
        stems = {_stem(p) for p in kept}
        more = {p for p in paths if p not in kept and (
            any(b in kept for b in bases[p]) if bases[p] is not None else
            any(stem in texts[p] for stem in stems))}
        if not more:
            break
        kept |= more
    return [p for p in sorted(kept)
            if '_base_' not in osp.relpath(p, root).split(osp.sep)]


def _backbone_type(model) -> Optional[str]:
    backbone = model.get('backbone') if isinstance(model, dict) else None
    kind = backbone.get('type') if isinstance(backbone, dict) else None
    return kind if isinstance(kind, str) else None


def zoo_configs(package: str) -> List[ZooConfig]:
    """Every config of ``package`` whose model's backbone type is one of
    :data:`REPLACED`, and every candidate mmengine cannot read."""
    root = config_root(package)
    found = []
    for path in _candidates(root):
        name = osp.relpath(path, root)
        try:
            model = Config.fromfile(path).get('model')
        except Exception as e:  # the peer's own config: reported, not ours
            found.append(ZooConfig(package, name, None,
                                   f'{type(e).__name__}: {e}'))
            continue
        if _backbone_type(model) in REPLACED:
            found.append(ZooConfig(package, name, model))
    return found


def _model_key(model: dict) -> str:
    model = copy.deepcopy(model).to_dict()
    model['backbone'].pop('init_cfg', None)  # a download, never fetched
    return repr(model)


def zoo_models(configs: List[ZooConfig]) -> List[ZooModel]:
    """The distinct models of readable ``configs``, in config order."""
    models: Dict[str, ZooModel] = {}
    for cfg in configs:
        if cfg.model is None:
            continue
        key = cfg.package + _model_key(cfg.model)
        if key not in models:
            models[key] = ZooModel(cfg.package, [], cfg.model)
        models[key].configs.append(cfg.name)
    return list(models.values())
