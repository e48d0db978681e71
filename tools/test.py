"""Evaluate a checkpoint with the config's test metric (COCO mAP, mIoU, ...).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
                         [--tta] [--amp] [--cfg-options k=v ...]
                         [--launcher pytorch]

``--tta`` runs the config's test-time augmentation: ``tta_pipeline`` replaces
the test pipeline and ``tta_model`` wraps the model (as mmdet's and mmseg's
own tools do). ``--amp`` runs inference under mmengine's autocast (the test
loop's ``fp16=True``): fp16 on a GPU, bf16 on a CPU. Every batch is checked
for NaN/Inf pixels on the host (``mmvisattn.FiniteInputHook``).
"""
import argparse
import os.path as osp
from contextlib import nullcontext

from mmengine.config import Config
from mmengine.runner import Runner

import mmvisattn  # registers the models; runtime() below
from mmvisattn.checkpoint import (
    CheckpointError,
    read_checkpoint,
    verify_checkpoint,
)
from mmvisattn.cli import (
    close_distributed,
    parse_tool_args,
    prepare_config,
)
from mmvisattn.datasets.checks import check_dataloader_files
from mmvisattn.engine.hooks import add_custom_hooks
from mmvisattn.environment import mmcv_ops_fp32_under_bf16


def parse_args():
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where to save the metrics')
    parser.add_argument(
        '--out', help='dump raw predictions to this pickle file')
    parser.add_argument(
        '--tta', action='store_true',
        help='test-time augmentation: the config\'s tta_pipeline and '
        'tta_model')
    parser.add_argument(
        '--amp', action='store_true',
        help='mixed precision inference: fp16 on a GPU, bf16 on a CPU')
    return parse_tool_args(parser)


def apply_tta(cfg, config_path):
    """Swap in the config's test-time augmentation pipeline and model."""
    missing = [k for k in ('tta_model', 'tta_pipeline') if k not in cfg]
    if missing:
        raise SystemExit(
            f'--tta: {config_path} defines no {" / ".join(missing)}; add '
            '`tta_model = dict(type=..., ...)` and `tta_pipeline = [...]` '
            '(see configs/swin/htc++_swin-b-*.py) or test without --tta')
    if cfg.get('default_scope') == 'mmdet':
        import mmvisattn.models.test_time_augs  # noqa: F401  (registers)
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model
    views = 1
    for step in cfg.tta_pipeline:
        if step.get('type') == 'TestTimeAug':
            for choices in step['transforms']:
                views *= len(choices)
    print(f'--tta: {cfg.tta_model.type} merges {views} augmented views '
          'of each image', flush=True)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main():
    try:
        run(parse_args())
    except CheckpointError as e:
        raise SystemExit(f'tools/test.py: {e}')


def run(args):
    if not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'no checkpoint at {args.checkpoint}')
    cfg = prepare_config(
        Config.fromfile(args.config), args.config, args.work_dir,
        args.cfg_options, args.launcher)
    if args.tta:
        apply_tta(cfg, args.config)
    if args.amp:
        # mmengine's TestLoop(fp16=True) runs mmengine's autocast, which
        # picks fp16 on a GPU and bf16 on a CPU
        cfg.test_cfg = dict(cfg.get('test_cfg') or dict(type='TestLoop'),
                            fp16=True)
    add_custom_hooks(cfg, ['FiniteInputHook'])
    check_dataloader_files(cfg, 'test_dataloader', training=False)
    # a damaged file fails here, before minutes of model and data building
    checkpoint = read_checkpoint(args.checkpoint)
    cfg.load_from = args.checkpoint
    cfg.resume = False
    if args.out:
        if not args.out.endswith(('.pkl', '.pickle')):
            raise ValueError('--out must be a .pkl file')
        cfg.test_evaluator = [cfg.test_evaluator] if isinstance(
            cfg.test_evaluator, dict) else list(cfg.test_evaluator)
        cfg.test_evaluator.append(dict(type='DumpResults', out_file_path=args.out))

    runner = Runner.from_cfg(cfg)
    # mmengine loads `load_from` non-strictly (a wrong architecture would only
    # warn and then score random weights): check every key and shape first
    verify_checkpoint(args.checkpoint, runner.model, checkpoint)
    del checkpoint
    # bf16 (on a CPU): mmcv's ops run in fp32 during the test run only
    # (mmvisattn/environment.py, 3.; fp16 and fp32 are untouched)
    with mmcv_ops_fp32_under_bf16() if args.amp else nullcontext():
        runner.test()
    close_distributed()


if __name__ == '__main__':
    main()
