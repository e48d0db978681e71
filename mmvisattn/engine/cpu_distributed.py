"""Distributed training and testing on machines without GPUs (torchrun + gloo).

mmengine's pytorch launcher always calls ``torch.cuda.set_device`` and wraps
the model in DDP with ``device_ids=[LOCAL_RANK]``; torch's SyncBatchNorm
refuses CPU tensors. On a CPU-only machine ``tools/train.py --launcher
pytorch`` (or ``slurm``) therefore initialises the gloo group itself (the
Runner then skips its own ``init_dist``) and wraps the model with
``CPUDistributedDataParallel``, whose SyncBN layers synchronise over gloo.
"""
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.model import MMDistributedDataParallel
from torch.nn.modules.batchnorm import _BatchNorm

from mmvisattn.registry import MODEL_WRAPPERS


class CPUSyncBatchNorm(_BatchNorm):
    """``nn.SyncBatchNorm`` for CPU tensors.

    In training under a process group the batch statistics come from one
    differentiable all-reduce of (sum, sum of squares, count) over all
    ranks, so the normalisation, its gradient and the running statistics are
    those of the global batch (a batch of 1 per process is fine). Otherwise
    it is torch's BatchNorm. Same parameters and buffers as SyncBatchNorm;
    not a subclass of it, since DDP refuses SyncBatchNorm on CPU modules.
    """

    process_group = None

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() < 2:
            raise ValueError(f'expected at least 2D input, got {x.dim()}D')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_available() and
                dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        count = x.new_full((1, ), x.numel() // channels)
        stats = dist_nn.all_reduce(
            torch.cat([x.sum(dims), (x * x).sum(dims), count]),
            group=self.process_group or dist.group.WORLD)
        total = stats[-1]
        mean = stats[:channels] / total
        var = (stats[channels:2 * channels] / total - mean * mean).clamp_min(0)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                momentum = self.momentum if self.momentum is not None \
                    else 1.0 / float(self.num_batches_tracked)
                unbiased = var * total / (total - 1).clamp_min(1)
                self.running_mean.lerp_(mean, momentum)
                self.running_var.lerp_(unbiased, momentum)
        shape = [1, channels] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y


def convert_to_cpu_sync_batchnorm(module: nn.Module) -> nn.Module:
    """Let every ``nn.SyncBatchNorm`` (mmcv's ``SyncBN``) of ``module`` run
    on CPU tensors; parameters, buffers and state-dict keys are kept."""
    for m in module.modules():
        if isinstance(m, nn.SyncBatchNorm):
            m.__class__ = CPUSyncBatchNorm
    return module


@MODEL_WRAPPERS.register_module()
class CPUDistributedDataParallel(MMDistributedDataParallel):
    """DDP over CPU modules, with SyncBN synchronised over the process
    group (:class:`CPUSyncBatchNorm`)."""

    def __init__(self, module, device_ids=None, **kwargs):
        module = convert_to_cpu_sync_batchnorm(module)
        super().__init__(module=module, device_ids=None, **kwargs)


def _env_from_slurm() -> None:
    """torchrun-style variables from SLURM's, for ``--launcher slurm`` on
    CPU nodes (mmengine's slurm init assumes GPUs)."""
    os.environ.setdefault('RANK', os.environ['SLURM_PROCID'])
    os.environ.setdefault('WORLD_SIZE', os.environ['SLURM_NTASKS'])
    os.environ.setdefault('LOCAL_RANK', os.environ.get('SLURM_LOCALID', '0'))
    if 'MASTER_ADDR' not in os.environ:
        import subprocess
        nodes = os.environ.get('SLURM_NODELIST', '127.0.0.1')
        first = subprocess.run(
            ['scontrol', 'show', 'hostname', nodes], capture_output=True,
            text=True).stdout.split() if ',' in nodes or '[' in nodes \
            else [nodes]
        os.environ['MASTER_ADDR'] = first[0] if first else nodes
    os.environ.setdefault('MASTER_PORT', '29500')


def init_cpu_distributed(cfg: Config, launcher: str = 'pytorch') -> None:
    if launcher == 'slurm':
        _env_from_slurm()
    dist_cfg = cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})
    if dist_cfg.get('backend', 'nccl') == 'nccl':
        dist_cfg['backend'] = 'gloo'  # NCCL needs GPUs
    if not dist.is_initialized():
        dist.init_process_group(backend=dist_cfg['backend'])
    wrapper = dict(cfg.get('model_wrapper_cfg') or {})
    wrapper['type'] = 'mmvisattn.CPUDistributedDataParallel'
    wrapper.setdefault('broadcast_buffers', False)
    wrapper.setdefault('find_unused_parameters',
                       cfg.get('find_unused_parameters', False))
    cfg.model_wrapper_cfg = wrapper
    if dist.get_rank() == 0:
        print_log(
            f'no GPU: distributed over {dist_cfg["backend"]} with '
            f'{dist.get_world_size()} CPU processes; SyncBN synchronised '
            'over the group', logger='current')
