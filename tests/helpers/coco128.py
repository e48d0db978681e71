"""coco128 runs of the zoo configs, shrunk to CPU size: the override config
(2 images, 0.3x the recipe's sizes, fewer proposals and RoIs, random
initialisation), tools/train.py + tools/test.py end to end, and one loss
step on what mmengine's Runner builds from the same override."""
import json
import os.path as osp
import re

from mmengine.config import Config

from helpers import plain, run_tools, runner_loss_step, shared_dataset

SCALE = 0.3  # of the recipe's image sizes: short side 144..240, long <= 400


NUM_IMAGES = 2


def _scaled(value):
    if isinstance(value, (list, tuple)) and value and \
            isinstance(value[0], (list, tuple)):
        return [_scaled(v) for v in value]
    return tuple(max(32, int(round(v * SCALE))) for v in value)


def shrink_pipeline(pipeline):
    """The same transforms with every resize scale and crop size x SCALE."""
    if isinstance(pipeline, list):
        return [shrink_pipeline(t) for t in pipeline]
    t = dict(pipeline)
    for key in ('scale', 'scales', 'crop_size'):
        if isinstance(t.get(key), (list, tuple)):
            t[key] = _scaled(t[key])
    if 'transforms' in t:
        t['transforms'] = shrink_pipeline(t['transforms'])
    return t


def shrink_train_test_cfg(model):
    """Fewer proposals and RoIs per image, score threshold 0 (the model is
    almost untrained), at most 10 detections per image; the architecture is
    left as it is."""
    train_cfg, test_cfg = model.get('train_cfg'), model.get('test_cfg')
    if train_cfg and train_cfg.get('rpn_proposal'):
        train_cfg['rpn_proposal'].update(nms_pre=200, max_per_img=64)
    if train_cfg and train_cfg.get('rcnn'):
        stages = train_cfg['rcnn']
        for stage in stages if isinstance(stages, list) else [stages]:
            sampler = stage.get('sampler', {})
            if 'num' in sampler:
                sampler['num'] = 32
    if test_cfg and test_cfg.get('rpn'):
        test_cfg['rpn'].update(nms_pre=200, max_per_img=32)
    head = test_cfg.get('rcnn', test_cfg) if test_cfg else {}
    if 'score_thr' in head:
        head['score_thr'] = 0.0
    if 'max_per_img' in head:
        head['max_per_img'] = 10
    return dict(train_cfg=train_cfg, test_cfg=test_cfg)


def write_override(zoo_config, root, ann_file, path):
    """A config inheriting the zoo config by absolute path, shrunk."""
    cfg = Config.fromfile(zoo_config)
    model = shrink_train_test_cfg(plain(cfg.model))
    dataset = dict(data_root=root + '/', ann_file=ann_file,
                   data_prefix=dict(img='images/'))
    loader = dict(num_workers=0, persistent_workers=False)
    lines = [
        f'_base_ = {zoo_config!r}',
        'model = dict(backbone=dict(init_cfg=None), '
        f'train_cfg={model["train_cfg"]!r}, test_cfg={model["test_cfg"]!r})',
        f'train_dataloader = dict(batch_size=1, **{loader!r}, '
        f'dataset=dict(**{dataset!r}, '
        'pipeline='
        f'{shrink_pipeline(plain(cfg.train_dataloader.dataset.pipeline))!r}'
        '))',
        f'test_dataloader = dict(**{loader!r}, dataset=dict(**{dataset!r}, '
        'pipeline='
        f'{shrink_pipeline(plain(cfg.test_dataloader.dataset.pipeline))!r}'
        '))',
        f'test_evaluator = dict(ann_file={ann_file!r})',
        'val_dataloader = None',
        'val_cfg = None',
        'val_evaluator = None',
        'train_cfg = dict(max_epochs=1)',
        'default_hooks = dict(logger=dict(interval=1), '
        'checkpoint=dict(interval=1, save_optimizer=False))',
        'randomness = dict(seed=0)',
    ]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return cfg


def coco128_files(directory):
    """coco128 and a NUM_IMAGES-image annotation file written in
    ``directory``: the grayscale image, the first one with a crowd region,
    then the first annotated images. Returns (root, ann file, count)."""
    root = shared_dataset('coco128')
    with open(osp.join(root, 'annotations', 'instances.json')) as f:
        coco = json.load(f)
    with_gt = {a['image_id'] for a in coco['annotations']}
    crowd = sorted({a['image_id'] for a in coco['annotations']
                    if a['iscrowd']})
    keep = [i['id'] for i in coco['images']
            if i['file_name'] == '000000000086.jpg'] + crowd[:1]
    for image in coco['images']:
        if len(set(keep)) >= NUM_IMAGES:
            break
        if image['id'] in with_gt:
            keep.append(image['id'])
    keep = set(keep)
    subset = dict(
        coco,
        images=[i for i in coco['images'] if i['id'] in keep],
        annotations=[a for a in coco['annotations'] if a['image_id'] in keep])
    path = osp.join(str(directory), 'subset.json')
    with open(path, 'w') as f:
        json.dump(subset, f)
    return root, path, len(keep)


def train_and_evaluate_on_coco128(zoo_config, tmp_path, mask=True):
    """tools/train.py (2 iterations, shrunk as write_override says) then
    tools/test.py on the same coco128 images; checks the printed COCO
    metrics and returns both outputs."""
    root, subset, num_images = coco128_files(tmp_path)
    config = str(tmp_path / f'tiny_{osp.basename(zoo_config)}')
    write_override(zoo_config, root, subset, config)
    work = str(tmp_path / 'work')
    ckpt = osp.join(work, 'epoch_1.pth')
    train_out, test_out = run_tools(
        ['tools/train.py', config, '--work-dir', work],
        ['tools/test.py', config, ckpt, '--work-dir', work])
    # 1 image per batch: one training iteration per image
    assert re.search(r'Epoch\(train\) \[1\]\[{0}/{0}\]'.format(num_images),
                     train_out), train_out[-3000:]
    assert osp.isfile(ckpt), train_out[-3000:]
    assert re.search(r'\[{0}/{0}\]'.format(num_images), test_out), \
        test_out[-3000:]
    assert 'Average Precision' in test_out
    assert re.search(r'coco/bbox_mAP: [\d.]+', test_out), test_out[-3000:]
    if mask:
        assert re.search(r'coco/segm_mAP: [\d.]+', test_out), \
            test_out[-3000:]
    return train_out, test_out


def loss_step_on_coco128(zoo_config, tmp_path, mask=True):
    """The shrunk override of ``zoo_config`` (write_override) as the Runner
    builds it, one training step on the first coco128 image: finite losses
    (mask losses exactly when the model predicts masks), and the step moves
    backbone, neck and head parameters."""
    root, subset, _ = coco128_files(tmp_path)
    config = str(tmp_path / f'tiny_{osp.basename(zoo_config)}')
    write_override(zoo_config, root, subset, config)
    step = runner_loss_step(config, tmp_path / 'work',
                            moves=('backbone.', 'neck.'))
    assert any('mask' in k for k in step.losses) == mask, step.losses
    assert any(not n.startswith(('backbone.', 'neck.'))
               for n in step.moved), 'no head parameter changed'
    return step
