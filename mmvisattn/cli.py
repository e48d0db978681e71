"""The command line and config handling our tools share (train, test, the
analysis and deployment tools, demo/image_demo.py); not imported by
``import mmvisattn``."""
import argparse
import os
import os.path as osp
from typing import Optional

import torch
from mmengine.config import Config, DictAction

from mmvisattn.engine.cpu_distributed import init_cpu_distributed

_SCOPES = ('mmdet', 'mmseg', 'mmpretrain')


def parse_tool_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Add the options every tool shares, parse, and export LOCAL_RANK."""
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config entries, e.g. train_cfg.max_iters=10')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher (torchrun: pytorch)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def config_scope(cfg: Config, config_path: str) -> str:
    """The config's ``default_scope``; refuse one our tools cannot run."""
    scope = cfg.get('default_scope')
    if scope not in _SCOPES:
        raise ValueError(
            f'{config_path}: default_scope={scope!r}; expected one of '
            f'{_SCOPES} (inherit mmdet::/mmseg:: default_runtime)')
    return scope


def prepare_config(cfg: Config, config_path: str,
                   work_dir: Optional[str] = None,
                   cfg_options: Optional[dict] = None,
                   launcher: str = 'none') -> Config:
    """Apply the common command-line options and check the config's scope."""
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    config_scope(cfg, config_path)
    cfg.launcher = launcher
    if launcher in ('pytorch', 'slurm') and not torch.cuda.is_available():
        init_cpu_distributed(cfg, launcher)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(config_path))[0])
    return cfg




def close_distributed() -> None:
    """Destroy the default process group at the end of a tool's run, where
    one is up, once every rank has reached this point. Left to interpreter
    exit, a rank can abort after its work is done ("terminate called
    without an active exception", exit code -6: seen for
    tools/dist_test.sh on a loaded machine, its metrics already printed),
    and torchrun then fails the whole job. The barrier keeps a rank from
    tearing down its gloo connections while another still works (rank 1
    aborted so while rank 0 saved the last checkpoint of
    tools/dist_train.sh, seen once)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def mixed_precision(cfg, dtype=None):
    """Switch ``cfg.optim_wrapper`` to mixed precision; returns what
    changed, for the log."""
    import torch
    if torch.cuda.is_available():
        dtype = dtype or 'float16'
        # mmengine's AmpOptimWrapper, with mmcv's ops in fp32 under bf16
        cfg.optim_wrapper.type = 'mmvisattn.AmpOptimWrapper'
        cfg.optim_wrapper.dtype = dtype
        if dtype == 'float16':
            cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
        return [f'optim_wrapper.type = mmvisattn.AmpOptimWrapper ({dtype}'
                + (', dynamic loss scale)' if dtype == 'float16' else ')')]
    if dtype == 'float16':
        raise SystemExit(
            '--amp-dtype float16: no GPU is visible, and CPU autocast runs '
            'bfloat16 only; use --amp (bfloat16 on a CPU)')
    cfg.optim_wrapper.type = 'mmvisattn.BF16OptimWrapper'
    cfg.optim_wrapper.pop('loss_scale', None)
    return ['optim_wrapper.type = mmvisattn.BF16OptimWrapper (no GPU '
            'visible: bfloat16 autocast on the CPU, no loss scale)']
