"""Config handling shared by tools/train.py and tools/test.py."""
import os.path as osp
from typing import Optional

import torch
from mmengine.config import Config

from .cpu_distributed import init_cpu_distributed

_SCOPES = ('mmdet', 'mmseg', 'mmpretrain')


def prepare_config(cfg: Config, config_path: str,
                   work_dir: Optional[str] = None,
                   cfg_options: Optional[dict] = None,
                   launcher: str = 'none') -> Config:
    """Apply the common command-line options and check the config's scope."""
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    scope = cfg.get('default_scope')
    if scope not in _SCOPES:
        raise ValueError(
            f'{config_path}: default_scope={scope!r}; expected one of '
            f'{_SCOPES} (inherit mmdet::/mmseg:: default_runtime)')
    cfg.launcher = launcher
    if launcher == 'pytorch' and not torch.cuda.is_available():
        init_cpu_distributed(cfg)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(config_path))[0])
    return cfg
