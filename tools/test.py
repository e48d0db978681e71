"""Evaluate a checkpoint with the config's test metric (COCO mAP, mIoU, ...).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE]
                         [--cfg-options k=v ...] [--launcher pytorch]
"""
import argparse
import os.path as osp

from mmengine.config import Config
from mmengine.runner import Runner

import mmvisattn  # noqa: F401
from mmvisattn.utils.tools import parse_tool_args, prepare_config


def parse_args():
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where to save the metrics')
    parser.add_argument(
        '--out', help='dump raw predictions to this pickle file')
    return parse_tool_args(parser)


def main():
    args = parse_args()
    if not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'no checkpoint at {args.checkpoint}')
    cfg = prepare_config(
        Config.fromfile(args.config), args.config, args.work_dir,
        args.cfg_options, args.launcher)
    cfg.load_from = args.checkpoint
    cfg.resume = False
    if args.out:
        if not args.out.endswith(('.pkl', '.pickle')):
            raise ValueError('--out must be a .pkl file')
        cfg.test_evaluator = [cfg.test_evaluator] if isinstance(
            cfg.test_evaluator, dict) else list(cfg.test_evaluator)
        cfg.test_evaluator.append(dict(type='DumpResults', out_file_path=args.out))

    runner = Runner.from_cfg(cfg)
    runner.test()


if __name__ == '__main__':
    main()
