"""Where a training step's time goes: the config's model, data and optimizer
wrapper built by mmengine's Runner as tools/train.py builds them (``--amp``
as there), a few timed steps, then one step under ``torch.profiler``:

    python dev/profile_train_step.py CONFIG [--amp]
        [--warmup 3] [--steps 4] [--rows 25] [--threads N]
        [--cfg-options KEY=VALUE ...]

Prints the wall time of each timed step, then the operators by self CPU
time (CUDA time too on a GPU), and the share of the step in the groups that
decide what mixed precision can gain: convolutions, GEMMs, attention,
mmcv's ops (which run in fp32 under a bf16 autocast), copies/dtype casts,
and the optimizer's step with its element-wise ops (fp32 with or without
``--amp``). docs/benchmarks.md quotes its output for the demo
detector.
"""
import argparse
import tempfile
import time

import torch
from mmengine.config import Config, DictAction
from mmengine.runner import Runner

from mmvisattn.cli import (
    mixed_precision,
    prepare_config,
)

# operator name -> group; an operator in none of them counts as 'other'
GROUPS = (
    ('convolutions', ('convolution', 'conv2d')),
    ('GEMMs', ('aten::mm', 'aten::addmm', 'linear', 'aten::matmul')),
    ('attention', ('aten::bmm', 'softmax', 'scaled_dot_product')),
    ('mmcv ops', ('RoIAlign', 'roi_align', 'nms', 'Deform', 'MaskedConv')),
    ('copies and casts', ('aten::copy_', 'aten::_to_copy')),
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--amp', action='store_true',
                        help='mixed precision as tools/train.py --amp')
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--steps', type=int, default=4,
                        help='timed steps before the profiled one')
    parser.add_argument('--rows', type=int, default=25,
                        help='operators listed')
    parser.add_argument('--threads', type=int, default=None,
                        help='torch threads (default: torch\'s)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv)


def group_of(name):
    for group, keys in GROUPS:
        if any(key in name for key in keys):
            return group
    return 'other'


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as work_dir:
        cfg = prepare_config(Config.fromfile(args.config), args.config,
                             work_dir, args.cfg_options)
        cfg.default_hooks.logger.interval = 10**6
        if args.amp:
            for change in mixed_precision(cfg):
                print(f'--amp: {change}')
        runner = Runner.from_cfg(cfg)
        model = runner.model
        wrapper = runner.build_optim_wrapper(cfg.optim_wrapper)
        # what the train loop does before its first step
        wrapper.initialize_count_status(model, 0, 10**6)
        batches = iter(runner.build_dataloader(cfg.train_dataloader))
        model.train()

        def step():
            model.train_step(next(batches), wrapper)
            if torch.cuda.is_available():  # a step's kernels run async
                torch.cuda.synchronize()

        for _ in range(args.warmup):
            step()
        times = []
        for _ in range(args.steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        print(f'{type(wrapper).__name__}, {torch.get_num_threads()} '
              f'threads; step seconds: '
              + ', '.join(f'{t:.2f}' for t in times))
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            step()
    events = prof.key_averages()
    print(events.table(sort_by='self_cpu_time_total', row_limit=args.rows))
    total = sum(e.self_cpu_time_total for e in events)
    shares = {}
    for e in events:
        group = group_of(e.key)
        shares[group] = shares.get(group, 0) + e.self_cpu_time_total
    print(f'| group (self CPU time) | ms | share of {total / 1000:.0f} ms |')
    print('|---|---|---|')
    for group in [g for g, _ in GROUPS] + ['other']:
        us = shares.get(group, 0)
        print(f'| {group} | {us / 1000:.0f} | {100 * us / total:.1f}% |')
    # the optimizer's element-wise ops are its children, counted under
    # 'other' above by their own names: its total holds them
    step_us = sum(e.cpu_time_total for e in events
                  if e.key.startswith('Optimizer.step'))
    print(f'optimizer step with its element-wise ops: {step_us / 1000:.0f} '
          f'ms ({100 * step_us / total:.1f}%)')


if __name__ == '__main__':
    main()
