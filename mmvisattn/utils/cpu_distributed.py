"""Distributed training and testing on machines without GPUs (torchrun + gloo).

mmengine's pytorch launcher always calls ``torch.cuda.set_device`` and wraps
the model in DDP with ``device_ids=[LOCAL_RANK]``; torch's SyncBatchNorm
refuses CPU modules. On a CPU-only machine ``tools/train.py --launcher
pytorch`` therefore initialises the gloo group itself (the Runner then skips
its own ``init_dist``) and wraps the model with ``CPUDistributedDataParallel``.
"""
import torch.distributed as dist
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.model import MMDistributedDataParallel, revert_sync_batchnorm

from mmvisattn.registry import MODEL_WRAPPERS


@MODEL_WRAPPERS.register_module()
class CPUDistributedDataParallel(MMDistributedDataParallel):
    """DDP over CPU modules; SyncBN becomes per-process BN (torch has no CPU
    SyncBN), so BatchNorm statistics are those of each process's batch."""

    def __init__(self, module, device_ids=None, **kwargs):
        module = revert_sync_batchnorm(module)
        super().__init__(module=module, device_ids=None, **kwargs)


def init_cpu_distributed(cfg: Config) -> None:
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
            f'{dist.get_world_size()} CPU processes; SyncBN runs as '
            'per-process BN', logger='current')
