"""camvid_ade runs of the UperNet configs, shrunk to CPU size (4 training
images, 0.25x the recipe's sizes, random initialisation), through the tools
end to end or as one loss step on what the Runner builds."""
import json
import os.path as osp
import re

from mmengine.config import Config

from helpers import plain, run_tools, runner_loss_step, shared_dataset

# -------------------------------------------------- camvid_ade, CPU run
SCALE = 0.25  # of the recipe's sizes: resize 512x128, crop 128x128


def _shrink(node):
    if isinstance(node, list):
        return [_shrink(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _shrink(v) for k, v in node.items()}
    for key in ('scale', 'crop_size'):
        if isinstance(node.get(key), (list, tuple)):
            node[key] = tuple(int(v * SCALE) for v in node[key])
    if isinstance(node.get('scale_factor'), float):  # --tta's ratios
        node['scale_factor'] *= SCALE
    return node


def write_camvid_config(zoo_config, root, path):
    """The zoo config on camvid_ade (11 classes, void = 0 reduced to the
    ignore index): 4 training images, 2 iterations of batch 2, 2 validation
    images; sizes (and --tta's scale ratios) x SCALE; random
    initialisation."""
    cfg = Config.fromfile(zoo_config)
    with open(osp.join(root, 'classes.json')) as f:
        meta = json.load(f)
    metainfo = dict(classes=tuple(meta['classes']),
                    palette=meta['palette'])
    num_classes = len(metainfo['classes'])
    crop = tuple(int(v * SCALE) for v in cfg.crop_size)

    def dataset(split, pipeline, count):
        # ADE20KDataset fixes ADE's 150 names; the generic dataset reads
        # the same layout with camvid's
        return dict(
            type='BaseSegDataset', data_root=root, metainfo=metainfo,
            img_suffix='.jpg', seg_map_suffix='.png', reduce_zero_label=True,
            data_prefix=dict(img_path=f'images/{split}',
                             seg_map_path=f'annotations/{split}'),
            indices=count, pipeline=_shrink(plain(pipeline)))

    loader = dict(num_workers=0, persistent_workers=False)
    lines = [
        f'_base_ = {zoo_config!r}',
        f'crop_size = {crop!r}',
        f'model = dict(data_preprocessor=dict(size={crop!r}), '
        'backbone=dict(init_cfg=None), '
        f'decode_head=dict(num_classes={num_classes}), '
        f'auxiliary_head=dict(num_classes={num_classes}))',
        f'train_dataloader = dict(batch_size=2, **{loader!r}, dataset=dict('
        '_delete_=True, '
        f'**{dataset("training", cfg.train_pipeline, 4)!r}))',
        f'test_dataloader = dict(batch_size=1, **{loader!r}, dataset=dict('
        '_delete_=True, '
        f'**{dataset("validation", cfg.test_pipeline, 2)!r}))',
        f'tta_pipeline = {_shrink(plain(cfg.tta_pipeline))!r}',
        'val_dataloader = None',
        'val_cfg = None',
        'val_evaluator = None',
        'train_cfg = dict(max_iters=2, val_interval=2)',
        'default_hooks = dict(logger=dict(interval=1), '
        'checkpoint=dict(by_epoch=False, interval=2, save_optimizer=False))',
        'randomness = dict(seed=0)',
    ]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return metainfo


def train_and_evaluate_on_camvid(zoo_config, tmp_path, tta=False):
    """tools/train.py (2 iterations of batch 2, write_camvid_config) then
    tools/test.py (and --tta); checks the printed per-class IoU table,
    aAcc and mIoU; returns the outputs and the class names."""
    root = shared_dataset('camvid_ade')
    config = str(tmp_path / f'camvid_{osp.basename(zoo_config)}')
    metainfo = write_camvid_config(zoo_config, root, config)
    work = str(tmp_path / 'work')
    ckpt = osp.join(work, 'iter_2.pth')
    commands = [['tools/train.py', config, '--work-dir', work],
                ['tools/test.py', config, ckpt, '--work-dir', work]]
    if tta:
        commands.append(['tools/test.py', config, ckpt, '--work-dir', work,
                         '--tta'])
    outs = run_tools(*commands)
    assert re.search(r'Iter\(train\) \[2/2\]', outs[0]), outs[0][-3000:]
    assert osp.isfile(ckpt), outs[0][-3000:]
    for out in outs[1:]:
        assert re.search(r'Iter\(test\) \[2/2\]', out), out[-3000:]
        # mmseg's IoUMetric: per-class table and the summary
        assert 'per class results' in out, out[-3000:]
        for cls in metainfo['classes']:
            assert re.search(rf'\|\s*{cls}\s*\|', out), (cls, out[-3000:])
        assert re.search(r'aAcc: [\d.]+\s+mIoU: [\d.]+', out), out[-3000:]
    return outs


def loss_step_on_camvid(zoo_config, tmp_path):
    """write_camvid_config's run as the Runner builds it, one training step
    on its first batch (2 camvid_ade images): finite decode and auxiliary
    losses, and the step moves backbone and head parameters."""
    root = shared_dataset('camvid_ade')
    config = str(tmp_path / f'camvid_{osp.basename(zoo_config)}')
    write_camvid_config(zoo_config, root, config)
    step = runner_loss_step(config, tmp_path / 'work',
                            moves=('backbone.', 'decode_head.'))
    assert any(k.startswith('decode.loss') for k in step.losses), \
        step.losses
    return step
