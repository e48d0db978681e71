"""Train a detector or segmentor from an mmdet or mmseg config.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]]
                          [--amp [--amp-dtype float16|bfloat16]]
                          [--cfg-options k=v ...] [--launcher pytorch]

``--amp``: on a GPU, ``mmvisattn.AmpOptimWrapper`` (mmengine's, fp16 with a
dynamic loss scale; ``--amp-dtype bfloat16`` for bf16, with mmcv's ops in
fp32); on a CPU, bf16 autocast through
``mmvisattn.BF16OptimWrapper`` (mmengine's wrapper needs a GPU, and bf16
needs no loss scale).

The config's ``default_scope`` (mmdet or mmseg) decides whose models,
datasets and metrics are used; mmvisattn's backbones are imported first.

Runs survive faults: checkpoints are written atomically (a killed run never
leaves a half-written file under a checkpoint's name), carry the RNG state,
and ``--resume`` picks the newest complete one; a NaN/Inf loss stops the run
before a checkpoint of broken weights is written; with many processes the
logged losses are the mean over ranks (mmvisattn/engine/hooks.py). The tool
prints each hook it adds or swaps; ``--no-fault-tolerance`` (or
``fault_tolerance = False`` in the config) trains with the config's hooks as
written.
"""
import argparse
import os.path as osp

from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmvisattn  # registers the models; runtime() below
from mmvisattn.cli import (
    close_distributed,
    mixed_precision,
    parse_tool_args,
    prepare_config,
)
from mmvisattn.datasets.checks import check_dataloader_files
from mmvisattn.engine import fault_tolerant_training
from mmvisattn.engine.resume import latest_complete_checkpoint, remove_partials


def parse_args():
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='where to save logs and models')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from CKPT, or from the latest checkpoint in the work '
        'dir when no path is given')
    parser.add_argument(
        '--amp', action='store_true',
        help='mixed precision training: fp16 with a dynamic loss scale on '
        'a GPU, bf16 on a CPU')
    parser.add_argument(
        '--amp-dtype', choices=('float16', 'bfloat16'),
        help='the autocast dtype of --amp (implies --amp); default float16 '
        'on a GPU, bfloat16 on a CPU (the only one there)')
    parser.add_argument(
        '--no-fault-tolerance', action='store_true',
        help='train with the config\'s hooks as written: no atomic '
        'checkpoints, RNG state, non-finite loss stop or rank-mean logging '
        '(also `fault_tolerance = False` in the config)')
    parser.add_argument(
        '--auto-scale-lr', action='store_true',
        help='scale the lr by the real batch size / base_batch_size')
    return parse_tool_args(parser)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main():
    args = parse_args()
    cfg = prepare_config(
        Config.fromfile(args.config), args.config, args.work_dir,
        args.cfg_options, args.launcher)
    if args.amp or args.amp_dtype:
        for change in mixed_precision(cfg, args.amp_dtype):
            print_log(f'--amp: {change}', logger='current')
    if args.auto_scale_lr:
        if 'auto_scale_lr' not in cfg or 'base_batch_size' not in \
                cfg.auto_scale_lr:
            raise KeyError('--auto-scale-lr needs `auto_scale_lr = dict('
                           'base_batch_size=...)` in the config')
        cfg.auto_scale_lr.enable = True
    check_dataloader_files(cfg, 'train_dataloader', training=True)
    if cfg.get('val_cfg'):
        check_dataloader_files(cfg, 'val_dataloader', training=False)
    if args.no_fault_tolerance or cfg.get('fault_tolerance', True) is False:
        print_log('fault tolerance off: the config\'s hooks as written',
                  logger='current')
    else:
        for change in fault_tolerant_training(cfg):
            print_log(f'fault tolerance: {change} (off: --no-fault-tolerance)',
                      logger='current')
    if args.resume == 'auto':
        latest, partials = latest_complete_checkpoint(cfg.work_dir)
        remove_partials(partials)
        cfg.resume = True
        # None: nothing complete yet, so training starts from iteration 0
        cfg.load_from = latest
    elif args.resume is not None:
        if not osp.isfile(args.resume):
            raise FileNotFoundError(f'--resume: no checkpoint at {args.resume}')
        cfg.resume = True
        cfg.load_from = args.resume

    runner = RUNNERS.build(cfg) if 'runner_type' in cfg else \
        Runner.from_cfg(cfg)
    runner.train()
    close_distributed()


if __name__ == '__main__':
    main()
