"""Test-only hook (imported by the configs tests/test_distributed.py writes):
each rank appends, after every training iteration, its iteration counter
and a checksum of its model parameters to ``probe_rank{R}.txt`` in the work
dir, so a test can see that the ranks stepped together with equal weights."""
import os.path as osp

import torch
from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class RankProbeHook(Hook):

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        with torch.no_grad():
            total = sum(p.double().sum().item()
                        for p in runner.model.parameters())
        path = osp.join(runner.work_dir, f'probe_rank{get_rank()}.txt')
        with open(path, 'a') as f:
            f.write(f'{runner.iter + 1} {total!r}\n')
