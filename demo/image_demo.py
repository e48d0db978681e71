"""Run a trained detector or segmentor on one image and draw the result.

    python demo/image_demo.py IMAGE CONFIG CHECKPOINT --out-file OUT.png \\
        [--device cpu] [--score-thr 0.3] [--opacity 0.5]

The config's ``default_scope`` decides the API: mmdet's ``init_detector`` /
``inference_detector`` and DetLocalVisualizer (boxes, masks, class names and
scores above ``--score-thr``), or mmseg's ``init_model`` / ``inference_model``
and SegLocalVisualizer (the predicted map over the image). The output has the
input image's size.

Before any drawing the checkpoint must fit the model built from the config:
mmengine loads weights non-strictly, so a checkpoint of another architecture
would otherwise only warn and draw the guesses of random weights.
"""
import argparse
import os.path as osp

import mmcv
import torch
from mmengine.config import Config

import mmvisattn  # registers the models; runtime() below
from mmvisattn.checkpoint import (
    CheckpointError,
    read_checkpoint,
    verify_checkpoint,
)
from mmvisattn.cli import config_scope


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Inference on one image; draw the result to a file')
    parser.add_argument('img', help='image file')
    parser.add_argument('config', help='mmdet or mmseg config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out-file', required=True, help='where to write the drawn image')
    parser.add_argument(
        '--device', default='cuda:0' if torch.cuda.is_available() else 'cpu',
        help='cpu, cuda:0, ... (default: cuda:0 if there is one)')
    parser.add_argument(
        '--score-thr', type=float, default=0.3,
        help='detection: draw boxes and masks scoring at least this')
    parser.add_argument(
        '--opacity', type=float, default=0.5,
        help='segmentation: opacity of the drawn map, in (0, 1]')
    return parser.parse_args(argv)


def _visualizer(model, registry, **kwargs):
    """The config's visualizer writing only ``out_file`` (not through its
    vis_backends), with the checkpoint's classes and palette."""
    visualizer = registry.build(
        dict(model.cfg.visualizer, name='image_demo', vis_backends=None,
             **kwargs))
    visualizer.dataset_meta = model.dataset_meta
    return visualizer


def detect(args, checkpoint):
    from mmcv.transforms import Compose
    from mmdet.apis import inference_detector, init_detector
    from mmdet.registry import VISUALIZERS
    from mmdet.utils import get_test_pipeline_cfg

    model = init_detector(args.config, args.checkpoint, device=args.device)
    verify_checkpoint(args.checkpoint, model, checkpoint)
    # a test pipeline loads annotations for evaluation; an image has none
    pipeline = [t for t in get_test_pipeline_cfg(model.cfg)
                if not t['type'].endswith('LoadAnnotations')]
    result = inference_detector(model, args.img, Compose(pipeline))
    visualizer = _visualizer(model, VISUALIZERS)
    visualizer.add_datasample(
        'result', mmcv.imread(args.img, channel_order='rgb'), result,
        draw_gt=False, show=False, out_file=args.out_file,
        pred_score_thr=args.score_thr)
    return result


def segment(args, checkpoint):
    from mmengine.model import revert_sync_batchnorm
    from mmseg.apis import inference_model, init_model
    from mmseg.registry import VISUALIZERS

    model = init_model(args.config, args.checkpoint, device=args.device)
    verify_checkpoint(args.checkpoint, model, checkpoint)
    if args.device == 'cpu':
        model = revert_sync_batchnorm(model)  # SyncBN needs a process group
    result = inference_model(model, args.img)
    visualizer = _visualizer(model, VISUALIZERS, alpha=args.opacity)
    visualizer.add_datasample(
        'result', mmcv.imread(args.img, channel_order='rgb'), result,
        draw_gt=False, show=False, out_file=args.out_file)
    return result


def run(args):
    """Check the inputs, infer, draw; return the DetDataSample or
    SegDataSample."""
    if not osp.isfile(args.img):
        raise FileNotFoundError(f'no image at {args.img}')
    if not 0 < args.opacity <= 1:
        raise ValueError(f'--opacity {args.opacity}: must be in (0, 1]')
    cfg = Config.fromfile(args.config)
    scope = config_scope(cfg, args.config)
    if scope not in ('mmdet', 'mmseg'):
        raise ValueError(f'{args.config}: default_scope={scope!r}; this demo '
                         'runs mmdet and mmseg models')
    # read once here: a missing or damaged file is named before the model
    # is built; the model is then checked against it
    checkpoint = read_checkpoint(args.checkpoint)
    result = (detect if scope == 'mmdet' else segment)(args, checkpoint)
    del checkpoint
    return result


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
    except (CheckpointError, FileNotFoundError, ValueError) as e:
        raise SystemExit(f'image_demo.py: {e}')
    print(f'wrote {args.out_file}')


if __name__ == '__main__':
    main()
