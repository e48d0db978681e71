"""Dataset preflight: what tools/train.py and tools/test.py check before
building anything, so that a bad dataset fails in a second with the file and
config field named, instead of hours later (an image missing from disk is
only read when the sampler reaches it) or deep inside mmengine (an
annotation file without annotations ends in numpy's "need at least one
array to concatenate")."""
import inspect
import json
import os
import os.path as osp
from typing import Iterator, Optional, Tuple

from mmengine.config import Config, ConfigDict

from mmvisattn.utils.listing import short_listing


def _join(root: Optional[str], path: str) -> str:
    return path if not root or osp.isabs(path) else osp.join(root, path)


def _leaves(dataset: dict, field: str) -> Iterator[Tuple[dict, str]]:
    """The datasets that read files, through mmengine/mmdet wrappers."""
    if 'datasets' in dataset:  # ConcatDataset
        for i, d in enumerate(dataset['datasets']):
            yield from _leaves(d, f'{field}.datasets[{i}]')
    elif 'dataset' in dataset:  # RepeatDataset, ClassBalanced, MultiImageMix
        yield from _leaves(dataset['dataset'], f'{field}.dataset')
    else:
        yield dataset, field


def _default(dataset: dict, key: str, scope: str):
    """A dataset argument from the config, else the class's default."""
    if key in dataset:
        return dataset[key]
    from mmengine.registry import DATASETS, DefaultScope
    with DefaultScope.overwrite_default_scope(scope):
        cls = DATASETS.get(dataset.get('type', ''))
    if cls is None:
        return None
    param = inspect.signature(cls.__init__).parameters.get(key)
    return None if param is None or param.default is param.empty \
        else param.default


def check_coco(dataset: dict, field: str, training: bool) -> None:
    root = dataset.get('data_root')
    ann = _join(root, dataset['ann_file'])
    if not osp.isfile(ann):
        raise FileNotFoundError(f'{field}.ann_file: {ann} does not exist')
    try:
        with open(ann) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f'{field}.ann_file: {ann} is not valid JSON: {e}')
    if 'images' not in data:
        return  # not COCO instances (e.g. a panoptic or custom format)
    images = data['images']
    if not images:
        raise ValueError(f'{ann} ({field}.ann_file) lists no images')
    prefix = dataset.get('data_prefix') or {}
    img_dir = _join(root, prefix.get('img', ''))
    missing = [
        im['file_name'] for im in images
        if not osp.isfile(osp.join(img_dir, im['file_name']))
    ]
    if missing:
        raise FileNotFoundError(
            f'{ann} ({field}.ann_file) lists {len(missing)} of its '
            f'{len(images)} images that are not under {img_dir} '
            f'({field}.data_prefix.img): {short_listing(missing)}')
    filter_cfg = dataset.get('filter_cfg') or {}
    if training and filter_cfg.get('filter_empty_gt', False):
        ids = {im['id'] for im in images}
        annotated = {
            a.get('image_id')
            for a in data.get('annotations', []) if not a.get('iscrowd')
        } & ids
        if not annotated:
            raise ValueError(
                f'{ann} ({field}.ann_file): none of its {len(images)} images '
                'has a (non-crowd) annotation, and '
                f'{field}.filter_cfg.filter_empty_gt=True removes images '
                'without one: nothing would be left to train on')


def check_seg(dataset: dict, field: str, scope: str) -> None:
    root = dataset.get('data_root')
    prefix = dataset.get('data_prefix') or {}
    img_dir = _join(root, prefix.get('img_path', ''))
    if not osp.isdir(img_dir):
        raise FileNotFoundError(
            f'{field}.data_prefix.img_path: {img_dir} is not a folder')
    img_suffix = _default(dataset, 'img_suffix', scope) or '.jpg'
    seg_suffix = _default(dataset, 'seg_map_suffix', scope) or '.png'
    names = sorted(
        osp.relpath(osp.join(d, f), img_dir)
        for d, _, files in os.walk(img_dir) for f in files
        if f.endswith(img_suffix))
    if not names:
        raise ValueError(f'{img_dir} ({field}.data_prefix.img_path) holds '
                         f'no *{img_suffix} images')
    if not prefix.get('seg_map_path'):
        return
    seg_dir = _join(root, prefix['seg_map_path'])
    missing = [
        n for n in names if not osp.isfile(
            osp.join(seg_dir, n[:-len(img_suffix)] + seg_suffix))
    ]
    if missing:
        raise FileNotFoundError(
            f'{len(missing)} of the {len(names)} images in {img_dir} have no '
            f'label map (*{seg_suffix}) in {seg_dir} '
            f'({field}.data_prefix.seg_map_path): {short_listing(missing)}')


def check_dataloader_files(cfg: Config, name: str, training: bool) -> None:
    """Check the files of ``cfg[name].dataset`` (``train_dataloader``, ...)
    on local disks; remote backends are left to their own errors."""
    loader = cfg.get(name)
    if not isinstance(loader, (dict, ConfigDict)) or 'dataset' not in loader:
        return
    scope = cfg.get('default_scope')
    for dataset, field in _leaves(loader['dataset'], f'{name}.dataset'):
        if dataset.get('backend_args') or str(
                dataset.get('data_root', '')).startswith(('s3:', 'http')):
            continue
        ann_file = dataset.get('ann_file') or ''
        if ann_file.endswith('.json'):
            check_coco(dataset, field, training)
        elif scope == 'mmseg' and not ann_file:
            check_seg(dataset, field, scope)
