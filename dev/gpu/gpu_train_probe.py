"""Time a few training iterations of a detection or segmentation config.

    python dev/gpu/gpu_train_probe.py CONFIG --data-root DIR
        [--iters 20] [--warmup 5] [--batch-size 2]
        [--amp-dtype float16|bfloat16|float32] [--mmdet-backbone]
        [--fixed-scale W H] [--end-by UNIX_TIME] [--json OUT]
        [--against OTHER.json] [--work-dir DIR] [--cfg-options k=v ...]

Runs CONFIG (a file, or a package's config such as
``mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py``) with mmengine's
Runner for ``--iters`` iterations on the layout ``tools/make_demo_data.py``
writes (COCO instances, or its ADE20K copy for mmseg configs), then prints
one line: seconds per iteration after ``--warmup`` iterations (median, the
host waiting for the GPU at both ends of each step, data loading not
counted), ``torch.cuda.max_memory_allocated`` over the run, and every step
whose loss was not finite or that the fp16 loss scaler skipped (its scale
dropped: inf/NaN gradients). Exit code 2 when there was such a step.

What changes in the config: the loop becomes an ``IterBasedTrainLoop`` of
``--iters`` iterations without validation or checkpoints, the epoch-based
lr steps go (the iteration-based warm-up stays), the backbone's
``init_cfg`` goes (nothing is downloaded; both sides of a comparison start
from random weights), the seed is 0. ``--amp-dtype`` switches the optimizer
wrapper as ``tools/train.py --amp-dtype`` does (float32: the config's own).
``--fixed-scale W H`` replaces the training pipeline's resizing and
cropping by one ``Resize(scale=(W, H), keep_ratio=True)``, so that two runs
see the same image sizes. ``--mmdet-backbone`` swaps in mmdet's
``SwinTransformer`` with the same keywords (``arch`` spelt out as
``embed_dims``, ``depths``, ``num_heads``).

``--end-by`` (default: the environment's ``GPU_CHECK_SECTION_END``, which
``gpu_check.sh`` sets to the end of the section's time budget) stops
training where its next step would end less than 8 s before that time,
and reports what ran. ``--json`` writes the figures; ``--against`` reads
another run's and prints the ratios mmvisattn / peer (or this run / that
run).
"""
import argparse
import importlib
import json
import math
import os
import os.path as osp
import statistics
import sys
import time

import torch
from mmengine.config import Config, ConfigDict, DictAction
from mmengine.hooks import Hook
from mmengine.runner import Runner

import mmvisattn  # registers the models; runtime() below
from mmvisattn.cli import mixed_precision
from mmvisattn.models.backbones import SwinTransformer

STOP_MARGIN = 8  # seconds left for the Runner to wind down and the report


class ProbeHook(Hook):
    """Per-step wall time (synchronised), peak memory, non-finite losses
    and steps the loss scaler skipped; stops the loop at ``end_by``."""

    priority = 'VERY_HIGH'  # before the logger resets the peak memory

    def __init__(self, end_by=None):
        self.end_by = end_by
        self.times, self.nonfinite, self.skipped = [], [], []
        self.sizes = set()
        self.peak = 0
        self.scales = []
        self.stopped_early = False

    @staticmethod
    def _sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    @staticmethod
    def _scale(runner):
        scaler = getattr(runner.optim_wrapper, 'loss_scaler', None)
        if scaler is None or not scaler.is_enabled():
            return None
        return float(scaler.get_scale())

    def before_train(self, runner):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.scale = self._scale(runner)
        self._sync()
        self.start = time.perf_counter()

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        self._sync()
        self.times.append(time.perf_counter() - self.start)
        if torch.cuda.is_available():
            self.peak = max(self.peak, torch.cuda.max_memory_allocated())
        for image in data_batch['inputs']:
            self.sizes.add('x'.join(map(str, image.shape[-2:])))
        if not math.isfinite(float(torch.as_tensor(outputs['loss']).detach())):
            self.nonfinite.append(batch_idx)
        scale = self._scale(runner)
        if scale is not None:
            self.scales.append(scale)
            if scale < self.scale:
                self.skipped.append(batch_idx)
        # stop where the next step would end too late
        last = batch_idx + 1 >= runner.train_loop.max_iters
        if self.end_by and not last and \
                time.time() + self.times[-1] > self.end_by - STOP_MARGIN:
            self.stopped_early = True
            runner.train_loop.stop_training = True


def load_config(path):
    """A config file, or ``package::path`` inside an installed package."""
    if '::' in path:
        package, inside = path.split('::', 1)
        root = osp.dirname(importlib.import_module(package).__file__)
        path = osp.join(root, '.mim', 'configs', inside)
    return Config.fromfile(path)


def innermost(dataset):
    while 'dataset' in dataset:  # a dataset wrapper
        dataset = dataset.dataset
    return dataset


def use_generated_data(cfg, root):
    """The training set: tools/make_demo_data.py's scenes under ``root``."""
    dataset = innermost(cfg.train_dataloader.dataset)
    if cfg.default_scope == 'mmseg':  # the ADE20K copy, labels 1..3
        dataset.update(data_root=osp.join(root, 'ade'), img_suffix='.png',
                       data_prefix=dict(img_path='images/training',
                                        seg_map_path='annotations/training'))
        return
    with open(osp.join(root, 'classes.json')) as f:
        classes = tuple(json.load(f)['classes'])
    dataset.update(data_root=root, ann_file='annotations/instances_train.json',
                   data_prefix=dict(img='images/train/'),
                   metainfo=dict(classes=classes))


RESIZING = ('Resize', 'RandomResize', 'RandomChoiceResize', 'RandomChoice',
            'RandomCrop')


def fix_scale(cfg, scale):
    """One Resize in place of the pipeline's resizing and cropping."""
    dataset = innermost(cfg.train_dataloader.dataset)
    pipeline, resized = [], False
    for step in dataset.pipeline:
        if step['type'] in RESIZING:
            if not resized:
                pipeline.append(dict(type='Resize', scale=tuple(scale),
                                     keep_ratio=True))
            resized = True
        else:
            pipeline.append(step)
    dataset.pipeline = pipeline


def mmdet_backbone(backbone):
    """mmdet's SwinTransformer with ours' keywords, ``arch`` spelt out."""
    kwargs = {k: v for k, v in backbone.items() if k not in ('type', 'arch')}
    arch = SwinTransformer.arch_zoo[backbone.get('arch', 'tiny')]
    return dict(type='mmdet.SwinTransformer', **dict(arch, **kwargs))


def prepare(cfg, args):
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    if args.mmdet_backbone:
        cfg.model.backbone = ConfigDict(mmdet_backbone(cfg.model.backbone))
    cfg.model.backbone.init_cfg = None
    use_generated_data(cfg, osp.abspath(args.data_root))
    if args.fixed_scale:
        fix_scale(cfg, args.fixed_scale)
    cfg.train_dataloader.batch_size = args.batch_size
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=args.iters,
                         val_interval=args.iters + 1)
    for key in ('val_cfg', 'val_dataloader', 'val_evaluator', 'test_cfg',
                'test_dataloader', 'test_evaluator'):
        cfg[key] = None
    schedulers = cfg.get('param_scheduler') or []
    if isinstance(schedulers, dict):
        schedulers = [schedulers]
    cfg.param_scheduler = [s for s in schedulers
                           if not s.get('by_epoch', True)]
    cfg.default_hooks.checkpoint = None
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=5)
    cfg.log_processor = dict(cfg.get('log_processor', {}), by_epoch=False)
    cfg.randomness = dict(seed=0)
    if args.amp_dtype != 'float32':
        mixed_precision(cfg, args.amp_dtype)
    cfg.work_dir = args.work_dir or osp.join(
        'work_dirs', 'gpu_train_probe',
        osp.splitext(osp.basename(args.config.split('::')[-1]))[0])
    return cfg


def summarise(cfg, args, hook):
    warm = len(hook.times) > args.warmup
    times = hook.times[args.warmup:] if warm else hook.times
    timed = (f'median of {len(times)} after {args.warmup} warm-up' if warm
             else f'median of all {len(times)}, fewer than the warm-up')
    return dict(
        config=args.config, backbone=backbone_name(cfg),
        amp_dtype=args.amp_dtype, batch_size=args.batch_size,
        iterations=len(hook.times), stopped_early=hook.stopped_early,
        sizes=sorted(hook.sizes),
        s_per_iter=statistics.median(times) if times else None,
        mean_s_per_iter=statistics.mean(times) if times else None,
        timed=timed, after_warmup=warm,
        peak_gib=hook.peak / 2**30 if torch.cuda.is_available() else None,
        nonfinite_losses=hook.nonfinite, skipped_steps=hook.skipped,
        loss_scale=[hook.scales[0], hook.scales[-1]] if hook.scales else None)


def backbone_name(cfg):
    """The backbone's type with its registry scope."""
    name = cfg.model.backbone.type
    return name if '.' in name else f'{cfg.default_scope}.{name}'


def describe(r):
    if r['s_per_iter'] is None:
        return 'no iteration finished'
    memory = f'{r["peak_gib"]:.2f} GiB' if r['peak_gib'] is not None \
        else 'n/a (no GPU)'
    scale = ('' if not r['loss_scale'] else
             ', loss scale {:g} -> {:g}'.format(*r['loss_scale']))
    return (
        f'{r["s_per_iter"]:.3f} s/iter ({r["timed"]}; mean '
        f'{r["mean_s_per_iter"]:.3f}), peak memory {memory}, '
        f'{r["iterations"]} iteration(s)'
        f'{" (stopped at the time budget)" if r["stopped_early"] else ""}, '
        f'inputs {",".join(r["sizes"])}, non-finite losses at '
        f'{r["nonfinite_losses"] or "none"}, skipped steps at '
        f'{r["skipped_steps"] or "none"}{scale}')


def ratio_line(this, other):
    if None in (this['s_per_iter'], other['s_per_iter']):
        return 'ratio: n/a (a run has no timing)'
    if not (this['after_warmup'] and other['after_warmup']):
        return 'ratio: n/a (a run stopped within its warm-up)'
    ours_first = 'mmvisattn' in this['backbone'] and \
        'mmvisattn' not in other['backbone']
    theirs_first = 'mmvisattn' in other['backbone'] and \
        'mmvisattn' not in this['backbone']
    a, b = (other, this) if theirs_first else (this, other)
    label = ('mmvisattn/peer' if ours_first or theirs_first else
             'this run/other run')
    line = (f'ratio {label} ({a["backbone"]} / {b["backbone"]}, '
            f'{this["amp_dtype"]}): s/iter '
            f'{a["s_per_iter"] / b["s_per_iter"]:.2f}')
    if a['peak_gib'] and b['peak_gib']:
        line += f', peak memory {a["peak_gib"] / b["peak_gib"]:.2f}'
    return line


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('--data-root', required=True,
                        help='a folder tools/make_demo_data.py wrote')
    parser.add_argument('--iters', type=int, default=20)
    parser.add_argument('--warmup', type=int, default=5)
    parser.add_argument('--batch-size', type=int, default=2)
    parser.add_argument('--amp-dtype', default='float16',
                        choices=('float16', 'bfloat16', 'float32'))
    parser.add_argument('--mmdet-backbone', action='store_true',
                        help="mmdet's SwinTransformer, same keywords")
    parser.add_argument('--fixed-scale', type=int, nargs=2,
                        metavar=('W', 'H'))
    parser.add_argument('--end-by', type=float,
                        default=os.environ.get('GPU_CHECK_SECTION_END'),
                        help='stop training in time to report by then')
    parser.add_argument('--json', help='write the figures here')
    parser.add_argument('--against', help='another run\'s --json')
    parser.add_argument('--work-dir')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main():
    args = parse_args()
    cfg = prepare(load_config(args.config), args)
    runner = Runner.from_cfg(cfg)
    hook = ProbeHook(args.end_by)
    runner.register_hook(hook)
    runner.train()
    result = summarise(cfg, args, hook)
    print(f'probe {args.config} [{result["backbone"]}, {args.amp_dtype}, '
          f'batch {args.batch_size}]: {describe(result)}', flush=True)
    if args.json:
        os.makedirs(osp.dirname(osp.abspath(args.json)), exist_ok=True)
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    if args.against:
        if osp.isfile(args.against):
            with open(args.against) as f:
                print(ratio_line(result, json.load(f)), flush=True)
        else:
            print(f'ratio: n/a ({args.against} was not written)', flush=True)
    if not hook.times:
        return 1
    return 2 if hook.nonfinite or hook.skipped else 0


if __name__ == '__main__':
    sys.exit(main())
