"""Draw a config's dataset, as its pipeline delivers it, to PNGs.

    python tools/analysis_tools/browse_dataset.py CONFIG --output-dir DIR \\
        [--num N] [--phase train|test] [--cfg-options k=v ...]

Each image goes through the dataset's whole pipeline (augmentations,
resizing, crops) and is drawn with its ground truth by the config's own
visualizer: boxes and masks with mmdet's DetLocalVisualizer, segmentation
maps with mmseg's SegLocalVisualizer, as mmdet's and mmseg's browse_dataset
tools do. The config's ``default_scope`` decides which. A picture that
looks wrong here (boxes off their objects, masks flipped without their
image, labels shifted by ``reduce_zero_label``) trains a wrong model.
"""
import argparse
import os.path as osp

import numpy as np
from mmengine.config import Config, DictAction
from mmengine.utils import ProgressBar

import mmvisattn  # registers the models; runtime() below
from mmvisattn.cli import config_scope


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Draw dataset samples and their ground truth to PNGs')
    parser.add_argument('config', help='mmdet or mmseg config file')
    parser.add_argument(
        '--output-dir', required=True,
        help='where to write the PNGs (named after the images)')
    parser.add_argument(
        '--num', type=int, default=None,
        help='draw the first N samples (default: the whole dataset)')
    parser.add_argument(
        '--phase', choices=['train', 'test'], default='train',
        help='the dataset of train_dataloader (with its augmentations) or '
        'of test_dataloader')
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction,
        help='override config entries, e.g. '
        'train_dataloader.dataset.data_root=data/shapes/')
    return parser.parse_args(argv)


def _gt_at_original_scale(dataset) -> bool:
    """Whether the pipeline loads annotations after resizing the image, as
    test pipelines do so that evaluation sees the original annotations."""
    while not hasattr(dataset, 'pipeline'):  # dataset wrappers
        dataset = getattr(dataset, 'dataset', None) or dataset.datasets[0]
    names = [type(t).__name__ for t in dataset.pipeline.transforms]
    load = next((i for i, n in enumerate(names) if 'LoadAnnotations' in n),
                None)
    return load is not None and any('Resize' in n for n in names[:load])


def _detection_sample(data_sample, to_image_scale: bool):
    """mmdet's browse_dataset conversions: box objects and bitmap/polygon
    masks to the arrays DetLocalVisualizer draws, at the image's scale."""
    from mmdet.models.utils import mask2ndarray
    from mmdet.structures.bbox import BaseBoxes

    gt_instances = data_sample.gt_instances
    bboxes = gt_instances.get('bboxes', None)
    masks = gt_instances.get('masks', None)
    if to_image_scale and 'scale_factor' in data_sample:
        if isinstance(bboxes, BaseBoxes):
            bboxes.rescale_(data_sample.scale_factor)
        if masks is not None:
            masks = masks.resize(data_sample.img_shape)
    if isinstance(bboxes, BaseBoxes):
        gt_instances.bboxes = bboxes.tensor
    if masks is not None:
        gt_instances.masks = mask2ndarray(masks).astype(bool)
    data_sample.gt_instances = gt_instances
    return data_sample


def _segmentation_sample(data_sample, to_image_scale: bool):
    """The ground-truth map at the image's scale (nearest: labels stay
    labels)."""
    import mmcv
    from mmengine.structures import PixelData

    seg = data_sample.gt_sem_seg.data[0]
    height, width = data_sample.img_shape[:2]
    if to_image_scale and seg.shape != (height, width):
        seg = mmcv.imresize(np.asarray(seg), (width, height),
                            interpolation='nearest')
        data_sample.gt_sem_seg = PixelData(data=seg[None])
    return data_sample


def browse(cfg: Config, config_path: str, output_dir: str,
           num: int = None, phase: str = 'train') -> list:
    """Write ``num`` drawn samples of the ``phase`` dataset; return the
    files written."""
    scope = config_scope(cfg, config_path)
    if scope == 'mmdet':
        from mmdet.registry import DATASETS, VISUALIZERS
        from mmdet.utils import register_all_modules
    elif scope == 'mmseg':
        from mmseg.registry import DATASETS, VISUALIZERS
        from mmseg.utils import register_all_modules
    else:
        raise SystemExit(f'{config_path}: default_scope={scope!r}; this tool '
                         'draws mmdet and mmseg datasets')
    register_all_modules(init_default_scope=True)

    loader = cfg.get(f'{phase}_dataloader')
    if not loader:
        raise SystemExit(f'{config_path}: no {phase}_dataloader to browse')
    dataset = DATASETS.build(loader.dataset)
    # files are written here, not through the config's vis_backends
    visualizer = VISUALIZERS.build(
        dict(cfg.visualizer, name=f'browse_dataset_{phase}',
             vis_backends=None))
    visualizer.dataset_meta = dataset.metainfo

    to_image_scale = _gt_at_original_scale(dataset)
    count = len(dataset) if num is None else min(num, len(dataset))
    progress_bar = ProgressBar(count)
    written = []
    for index in range(count):
        item = dataset[index]
        # CHW BGR tensor -> the HWC RGB array visualizers draw on (cv2 text
        # drawing needs it contiguous)
        img = np.ascontiguousarray(
            item['inputs'].permute(1, 2, 0).numpy()[..., ::-1])
        data_sample = item['data_samples'].numpy()
        if scope == 'mmdet':
            data_sample = _detection_sample(data_sample, to_image_scale)
        else:
            data_sample = _segmentation_sample(data_sample, to_image_scale)
        name = osp.basename(data_sample.img_path)
        out_file = osp.join(output_dir, osp.splitext(name)[0] + '.png')
        if out_file in written:  # an image repeated by a dataset wrapper
            out_file = out_file[:-len('.png')] + f'_{index}.png'
        visualizer.add_datasample(
            name, img, data_sample, draw_gt=True, draw_pred=False,
            show=False, out_file=out_file)
        written.append(out_file)
        progress_bar.update()
    return written


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    written = browse(cfg, args.config, args.output_dir, args.num, args.phase)
    print(f'\nwrote {len(written)} images to {args.output_dir}')


if __name__ == '__main__':
    main()
