"""The RSWAtt benchmark's generator (dev/make_rswatt_bench.py) and the
ablation script's bookkeeping (dev/rswatt_ablation.py:
metrics parsed from the test logs, the table made from the results JSON).
Fast: a few tiny scenes, no model trained."""
import filecmp
import json
import os
import os.path as osp

import cv2
import numpy as np
import pytest

from helpers import REPO, load_tool

bench = load_tool(osp.join('dev', 'make_rswatt_bench.py'))
ablation = load_tool(osp.join('dev', 'rswatt_ablation.py'))


@pytest.fixture(scope='module')
def small_set(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('bench') / 'a')
    bench.generate(root, num_train=24, num_val=4, size=(128, 128), seed=3)
    return root


def _files(root):
    return sorted(
        osp.relpath(osp.join(d, f), root) for d, _, fs in os.walk(root)
        for f in fs)


def test_same_seed_same_files_other_seed_other_images(small_set, tmp_path):
    again = str(tmp_path / 'b')
    bench.generate(again, num_train=24, num_val=4, size=(128, 128), seed=3)
    assert _files(small_set) == _files(again)
    for rel in _files(small_set):
        assert filecmp.cmp(osp.join(small_set, rel), osp.join(again, rel),
                           shallow=False), rel
    other = str(tmp_path / 'c')
    bench.generate(other, num_train=2, num_val=1, size=(128, 128), seed=4)
    name = osp.join('images', 'train', 'train_00000.png')
    assert not np.array_equal(cv2.imread(osp.join(small_set, name)),
                              cv2.imread(osp.join(other, name)))


def test_coco_and_ade_halves_agree(small_set):
    classes = json.load(open(osp.join(small_set, 'classes.json')))['classes']
    assert tuple(classes) == bench.CLASSES
    for split, ade in (('train', 'training'), ('val', 'validation')):
        coco = json.load(
            open(osp.join(small_set, 'annotations',
                          f'instances_{split}.json')))
        assert [c['name'] for c in coco['categories']] == list(classes)
        by_image = {}
        for ann in coco['annotations']:
            by_image.setdefault(ann['image_id'], []).append(ann)
        for image in coco['images']:
            name = image['file_name']
            img = cv2.imread(osp.join(small_set, 'images', split, name))
            assert img.shape == (128, 128, 3)
            assert np.array_equal(
                img,
                cv2.imread(osp.join(small_set, 'ade', 'images', ade, name)))
            label = cv2.imread(
                osp.join(small_set, 'ade', 'annotations', ade, name),
                cv2.IMREAD_UNCHANGED)
            anns = by_image.get(image['id'], [])
            # every labelled class has an instance, and the other way round
            assert set(np.unique(label)) - {0} == \
                {a['category_id'] for a in anns}
            for a in anns:
                x, y, w, h = a['bbox']
                assert 0 <= x and 0 <= y and x + w <= 128 and y + h <= 128
                crop = label[int(y):int(y + h), int(x):int(x + w)]
                # the visible pixels of the instance are in its box
                assert (crop == a['category_id']).sum() >= a['area'] > 0
                assert a['segmentation'] and all(
                    len(p) >= 6 and len(p) % 2 == 0
                    for p in a['segmentation'])
                assert bench.MIN_SIZE <= a['size'] <= bench.MAX_SIZE


def test_sizes_span_16x_and_every_class_appears(small_set):
    assert bench.MAX_SIZE / bench.MIN_SIZE >= 16
    anns = json.load(
        open(osp.join(small_set, 'annotations',
                      'instances_train.json')))['annotations']
    sizes = np.array([a['size'] for a in anns])
    assert sizes.max() / sizes.min() >= 8  # 24 images: most of the 19.2x
    assert {a['category_id'] for a in anns} == set(
        range(1, len(bench.CLASSES) + 1))
    # occlusion happens: some visible area is below the shape's full area,
    # seen as boxes of one class that overlap
    boxes = [a['bbox'] for a in anns]
    assert len(boxes) > 24  # several objects per image


def test_colour_does_not_give_the_class(small_set):
    """Each class's objects take colours from the one shared palette: the
    nearest palette colour of an object's pixels is not a function of its
    class."""
    palette = np.array(bench.COLOURS, float)
    seen = {}
    for i in range(24):
        name = f'train_{i:05d}.png'
        img = cv2.imread(osp.join(small_set, 'images', 'train',
                                  name)).astype(float)
        label = cv2.imread(osp.join(small_set, 'ade', 'annotations',
                                    'training', name),
                           cv2.IMREAD_UNCHANGED)
        for c in np.unique(label):
            if c == 0:
                continue
            mean = img[label == c].mean(0)
            seen.setdefault(int(c), set()).add(
                int(np.argmin(((palette - mean)**2).sum(1))))
    assert max(len(v) for v in seen.values()) >= 2


SEG_LOG = """
+------------+-------+-------+
|   Class    |  IoU  |  Acc  |
+------------+-------+-------+
| background | 91.44 | 99.35 |
|   square   |  0.0  |  0.0  |
|    disc    | 32.82 | 83.11 |
|  triangle  |  0.0  |  0.0  |
|    ring    |  nan  |  nan  |
|    bar     |  1.5  |  2.0  |
+------------+-------+-------+
12/03 15:31:19 - mmengine - INFO - Iter(test) [60/60]    aAcc: 83.5600  mIoU: 20.7100  mAcc: 30.4100  data_time: 0.0047  time: 0.1618
"""  # noqa: E501
DET_LOG = ('12/03 - mmengine - INFO - Iter(test) [60/60]    '
           'coco/bbox_mAP: 0.123  coco/bbox_mAP_50: 0.301  '
           'coco/bbox_mAP_75: 0.080  coco/bbox_mAP_s: 0.050  '
           'coco/bbox_mAP_m: 0.200  coco/bbox_mAP_l: -1.000  data_time: 0')


def test_metrics_parsed_from_the_test_logs():
    seg = ablation.parse_metrics('seg', SEG_LOG)
    assert seg['mIoU'] == 20.71 and seg['aAcc'] == 83.56
    assert seg['IoU']['background'] == 91.44 and seg['IoU']['bar'] == 1.5
    assert np.isnan(seg['IoU']['ring'])
    det = ablation.parse_metrics('det', DET_LOG)
    assert det == dict(bbox_mAP=12.3, bbox_mAP_50=30.1, bbox_mAP_75=8.0,
                       bbox_mAP_s=5.0, bbox_mAP_m=20.0, bbox_mAP_l=-100.0)
    with pytest.raises(RuntimeError, match='mIoU'):
        ablation.parse_metrics('seg', 'nothing')


def test_table_is_made_from_the_json(tmp_path):
    runs = [
        dict(task='det', variant=v, seed=s, iters=300,
             metrics=dict(bbox_mAP=m, bbox_mAP_50=3., bbox_mAP_s=1.,
                          bbox_mAP_m=2., bbox_mAP_l=-100.))
        for v, s, m in (('fixed', 0, 10.), ('fixed', 1, 12.),
                        ('fixed', 2, 14.), ('ms-gate', 0, 11.))
    ]
    path = str(tmp_path / 'r.json')
    ablation.write_json(path, dict(runs=runs, cost=dict(det=dict(fixed=dict(
        params_M=1.5, flops_G=0.25, latency_ms=12.3)))))
    text = ablation.table(path)
    assert '| 12.00 ± 2.00 | 10.00-14.00 | 0,1,2 | 3.0 / 1.0 / 2.0 | ' \
        '1.50M | 0.25G | 12.3 ms |' in text
    assert '| 11.00 ± - | 11.00-11.00 | 0 | 3.0 / 1.0 / 2.0 | - | - | - |' \
        in text
    assert 'segmentation' not in text


@pytest.mark.parametrize('task', ['seg', 'det'])
def test_every_variant_builds_what_it_says(task, tmp_path):
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    scope = 'mmseg' if task == 'seg' else 'mmdet'
    registry = __import__(f'{scope}.registry', fromlist=['MODELS']).MODELS
    attn = {}
    with DefaultScope.overwrite_default_scope(scope):
        for name in ablation.VARIANTS:
            cfg = Config.fromfile(ablation.variant_config(
                str(tmp_path), name, ablation.CONFIGS[task]))
            backbone = registry.build(cfg.model).backbone
            attn[name] = backbone.layers[0].blocks[0].attn
    assert attn['fixed'].window_pred is None
    for name, part in (('adaptive', 'DirectExtents'),
                       ('adaptive-offset', 'OffsetExtents'),
                       ('adaptive-anchor', 'AnchorExtents'),
                       ('adaptive-enhanced', 'EnhancedAnchorExtents')):
        assert type(attn[name].window_pred).__name__ == part
        assert attn[name].scale_windows == (9, )
    assert attn['ms-gate'].scale_windows == attn['ms-concat'].scale_windows \
        == (5, 9)
    assert type(attn['ms-gate'].fusion).__name__ == 'GateFusion'
    assert type(attn['ms-concat'].fusion).__name__ == 'ConcatFusion'
    assert type(attn['swin']).__name__ != type(attn['fixed']).__name__


def test_extents_per_layer_table():
    extents = load_tool(osp.join('dev', 'rswatt_extents.py'))
    assert extents.layer_of('backbone.layers.2.blocks.1.attn') == \
        'stage 3 block 2'
    assert extents.layer_of('decode_head.layers.0.attn') == 'stage 1'
    assert extents.layer_of('neck.attn') == 'neck'
    area = np.array([0.2, 0.2, 0.5, 0.6, 0.9])
    obj = np.array([0., 0., 6., 20., 70.])
    text = extents.per_layer_table({('stage 1', 9): (area, obj)},
                                   [8, 32, 64])
    assert '| stage 1 | 9 | 0.200 | 0.500 (1) | 0.600 (1) | - | 0.900 (1) |' \
        ' +1.00 |' in text


def test_readme_tables_are_the_committed_results():
    """configs/rswatt/README.md shows the tables the script makes from
    docs/rswatt_ablation.json, every line of them: a rerun that changes the
    JSON without the README (or the other way round) fails here."""
    text = ablation.table(osp.join(REPO, 'docs', 'rswatt_ablation.json'))
    with open(osp.join(REPO, 'configs', 'rswatt', 'README.md')) as f:
        readme = f.read()
    rows = [line for line in text.splitlines() if line.startswith('| ')]
    # two full tables: a header and a row per variant each
    assert len(rows) == 2 * (1 + len(ablation.VARIANTS))
    missing = [line for line in rows if line not in readme]
    assert not missing, missing
