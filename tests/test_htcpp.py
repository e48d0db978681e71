"""HTC++ (Swin paper, appendix A2.2): configs, InstaBoost, soft-NMS, TTA.

The family's end-to-end run is the Swin-B zoo config itself (semantic
branch, InstaBoost, global block, soft-NMS) on coco128 through
tools/train.py and tools/test.py (also --tta); only the image sizes, the data
paths and the schedule length are overridden. Swin-L and the configs without
the semantic branch take one loss step on what the Runner builds from the
same override, and the Swin-L test-dev config evaluates that Swin-L.
COCO-stuff maps do not exist for coco128, so the tests render "thing-only"
maps from its instance masks (stuff pixels 255, ignored).
"""
import glob
import json
import os
import os.path as osp
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from helpers import REPO, runner_loss_step, shared_dataset

ZOO = {
    arch: osp.join(
        REPO, 'configs', 'swin',
        f'htc++_swin-{arch}-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py')
    for arch in ('b', 'l')
}
NO_SEMANTIC = {
    arch: osp.join(
        REPO, 'configs', 'swin', f'htc++-without-semantic_swin-{arch}-p4-w7_'
        'fpn_instaboost-ms-400-1400_6x_coco.py')
    for arch in ('b', 'l')
}
# Swin paper, Table 2(c): parameters in millions (rounded as the paper does)
PAPER_PARAMS = {'b': 160, 'l': 284}
ENV = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')


def run_tool(*args, timeout=900):
    proc = subprocess.run([sys.executable, *args], cwd=REPO, env=ENV,
                          timeout=timeout, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc.stdout


def build(config, proposals=None):
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    register_all_modules()
    cfg = Config.fromfile(config)
    cfg.model.backbone.init_cfg = None  # no checkpoint download
    if proposals:  # 1000 RoIs x 3 stages of 4conv1fc heads: slow on a CPU
        cfg.model.test_cfg.rpn.max_per_img = proposals
        cfg.model.test_cfg.rcnn.max_per_img = proposals // 5
    return cfg, MODELS.build(cfg.model)


@pytest.mark.parametrize('arch', ['b', 'l'])
def test_zoo_configs_build_with_the_paper_recipe(arch):
    cfg, model = build(ZOO[arch])
    backbone = model.backbone
    assert type(backbone).__module__.startswith('mmvisattn')
    assert type(backbone.global_block.attn).__name__ == 'GlobalAttention'
    assert backbone.window_size == 7 and cfg.model.backbone.drop_path_rate \
        == 0.2
    assert backbone.embed_dims == {'b': 128, 'l': 192}[arch]
    assert 'window7_224_22k' in cfg.pretrained
    params = sum(p.numel() for p in model.parameters()) / 1e6
    assert round(params) == PAPER_PARAMS[arch], params
    assert model.roi_head.with_semantic
    assert all(h.reg_class_agnostic for h in model.roi_head.bbox_head)
    assert cfg.model.test_cfg.rcnn.nms == dict(type='soft_nms',
                                               iou_threshold=0.5)
    steps = [s['type'] for s in cfg.train_pipeline]
    assert steps == ['LoadImageFromFile', 'mmvisattn.InstaBoost',
                     'LoadAnnotations', 'RandomResize', 'RandomFlip',
                     'PackDetInputs']
    assert cfg.train_pipeline[3]['scale'] == [(1600, 400), (1600, 1400)]
    assert cfg.train_cfg.max_epochs == 72
    assert cfg.param_scheduler[1].milestones == [63, 69]
    assert cfg.optim_wrapper.optimizer.type == 'AdamW'
    assert cfg.optim_wrapper.optimizer.lr == 1e-4
    assert cfg.optim_wrapper.optimizer.weight_decay == 0.05
    tta = cfg.tta_pipeline[1]['transforms']
    assert len(tta[0]) == 6 and len(tta[1]) == 2
    assert cfg.tta_model.type == 'mmvisattn.InstanceSegTTAModel'

    cfg, model = build(NO_SEMANTIC[arch])
    assert not model.roi_head.with_semantic
    assert model.backbone.global_block is not None
    assert 'seg' not in cfg.train_dataloader.dataset.data_prefix
    assert not cfg.train_pipeline[2]['with_seg']


def test_swin_l_forward_on_cpu():
    """Swin-L is too slow to train on 2 cores: one small inference."""
    from mmdet.structures import DetDataSample
    _, model = build(ZOO['l'], proposals=50)
    model.eval()
    sample = DetDataSample(metainfo=dict(
        img_shape=(160, 224), ori_shape=(160, 224), scale_factor=(1., 1.),
        pad_shape=(160, 224), batch_input_shape=(160, 224)))
    with torch.no_grad():
        feats = model.backbone(torch.randn(1, 3, 160, 224))
        assert [f.shape[1] for f in feats] == [192, 384, 768, 1536]
        out = model.predict(torch.randn(1, 3, 160, 224), [sample])
    pred = out[0].pred_instances
    assert pred.masks.shape[1:] == (160, 224)


def test_soft_nms_cpu_op_decays_overlaps():
    from mmcv.ops import batched_nms
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 0., 11., 10.],
                          [50., 50., 60., 60.]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    dets, keep = batched_nms(boxes, scores, torch.zeros(3, dtype=torch.long),
                             dict(type='soft_nms', iou_threshold=0.5))
    assert keep.tolist() == [0, 2, 1]  # the overlap is kept, rescored
    assert dets[2, -1] < 0.8 and torch.allclose(dets[:2, -1],
                                                torch.tensor([0.9, 0.7]))


@pytest.fixture(scope='module')
def coco128():
    return shared_dataset('coco128')


def test_instaboost_on_a_coco128_sample(coco128):
    from mmvisattn.datasets.transforms import patch_instaboostfast
    patch_instaboostfast()
    from instaboostfast.pycococreater import binary_mask_to_polygon
    two_blobs = np.zeros((12, 12), bool)
    two_blobs[1:3, 1:3] = two_blobs[5:10, 4:10] = True
    # contours of different lengths: the unpatched 0.1.2 raises here with
    # numpy >= 1.24
    assert len(binary_mask_to_polygon(two_blobs)) == 2
    from mmdet.datasets import CocoDataset
    from mmdet.utils import register_all_modules
    register_all_modules()

    def sample(with_instaboost):
        pipeline = [dict(type='LoadImageFromFile')]
        if with_instaboost:  # always applied here (the recipe: half)
            pipeline.append(
                dict(type='mmvisattn.InstaBoost', aug_ratio=1.0))
        pipeline.append(
            dict(type='LoadAnnotations', with_bbox=True, with_mask=True))
        dataset = CocoDataset(
            data_root=coco128, ann_file='annotations/instances.json',
            data_prefix=dict(img='images/'), pipeline=pipeline,
            indices=[0])  # 000000000009.jpg: 8 objects
        np.random.seed(0)
        return dataset[0]

    plain, boosted = sample(False), sample(True)
    assert boosted['img'].shape == plain['img'].shape
    assert boosted['img'].dtype == np.uint8
    assert not np.array_equal(boosted['img'], plain['img'])
    h, w = boosted['img'].shape[:2]
    boxes = boosted['gt_bboxes'].tensor
    assert len(boxes) == len(boosted['gt_bboxes_labels']) == len(
        boosted['gt_masks']) > 0
    assert (boxes[:, 2:] > boxes[:, :2]).all()
    assert (boxes[:, :2] >= -1).all() and (boxes[:, 2] <= w + 1).all() and (
        boxes[:, 3] <= h + 1).all()
    assert not torch.equal(boxes, plain['gt_bboxes'].tensor)
    masks = boosted['gt_masks'].to_ndarray()
    assert masks.shape[1:] == (h, w) and masks.any(axis=(1, 2)).all()


def _thing_maps(coco128, image_ids, out_dir):
    """COCO-stuff-like maps for coco128: category id - 1 on instance pixels,
    255 (ignored) elsewhere, as `stuffthingmaps` encode things."""
    from PIL import Image
    from pycocotools.coco import COCO
    coco = COCO(osp.join(coco128, 'annotations', 'instances.json'))
    os.makedirs(out_dir)
    for image_id in image_ids:
        info = coco.imgs[image_id]
        seg = np.full((info['height'], info['width']), 255, np.uint8)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=image_id, iscrowd=False))
        for ann in sorted(anns, key=lambda a: -a['area']):
            seg[coco.annToMask(ann) > 0] = ann['category_id'] - 1
        Image.fromarray(seg).save(
            osp.join(out_dir,
                     osp.splitext(info['file_name'])[0] + '.png'))


OVERRIDE = '''\
_base_ = {zoo!r}
# coco128 at small scale: image sizes, paths and schedule only; the model,
# InstaBoost, the semantic branch and soft-NMS are the zoo config's.
data_root = {root!r}
# CPU budget: fewer RoIs (the recipe: 2000 proposals and 512 RoIs per stage
# in training, 1000 proposals at test), the same heads
_rcnn = [dict(stage, sampler=dict(stage['sampler'], num=64))
         for stage in _base_.model.train_cfg.rcnn]
model = dict(
    backbone=dict(init_cfg=None),
    train_cfg=dict(rpn_proposal=dict(max_per_img=200), rcnn=_rcnn),
    # a 2-iteration model scores below 0.001: keep every detection
    test_cfg=dict(rpn=dict(max_per_img=50),
                  rcnn=dict(score_thr=0.0, max_per_img=10)))
train_pipeline = [
    dict(s, scale=[(320, 192), (320, 256)]) if s['type'] == 'RandomResize'
    else s for s in _base_.train_pipeline
]
test_pipeline = [
    dict(s, scale=(320, 256)) if s['type'] == 'Resize' else s
    for s in _base_.test_pipeline
]
train_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(
        data_root=data_root, ann_file='annotations/instances.json',
        data_prefix=dict(img='images/', seg={seg!r}), indices=2,
        pipeline=train_pipeline))
val_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(data_root=data_root, ann_file={subset!r},
                 data_prefix=dict(img='images/'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file={subset!r})
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1, val_interval=100)
default_hooks = dict(
    logger=dict(interval=1),
    checkpoint=dict(interval=1, save_optimizer=False))
randomness = dict(seed=0)
# two scales + flip instead of six + flip
tta_pipeline = _base_.tta_pipeline
tta_pipeline[1]['transforms'][0] = [
    dict(type='Resize', scale=(320, 224), keep_ratio=True),
    dict(type='Resize', scale=(384, 288), keep_ratio=True),
]
'''


def _write_override(coco128, tmp, zoo_config):
    """OVERRIDE of an HTC++ zoo config on coco128 in ``tmp``: 2 training
    images with thing-only semantic maps, 4 held-out images."""
    with open(osp.join(coco128, 'annotations', 'instances.json')) as f:
        coco = json.load(f)
    # held out: the grayscale image, a crowd image and two more
    crowd = sorted({a['image_id'] for a in coco['annotations']
                    if a['iscrowd']})
    gray = [i['id'] for i in coco['images']
            if i['file_name'] == '000000000086.jpg']
    keep = set(gray + crowd[:1] + [i['id'] for i in coco['images'][2:4]])
    assert len(keep) == 4
    subset = dict(
        coco, images=[i for i in coco['images'] if i['id'] in keep],
        annotations=[a for a in coco['annotations']
                     if a['image_id'] in keep])
    subset_file = str(tmp / 'coco128_subset.json')
    with open(subset_file, 'w') as f:
        json.dump(subset, f)
    seg_dir = str(tmp / 'stuffthingmaps')
    _thing_maps(coco128, [i['id'] for i in coco['images'][:2]], seg_dir)

    config = str(tmp / 'htcpp_coco128.py')
    with open(config, 'w') as f:
        f.write(OVERRIDE.format(zoo=zoo_config, root=coco128 + '/',
                                seg=seg_dir + '/', subset=subset_file))
    return dict(config=config, work=str(tmp / 'work'), subset=subset)


def _train_two_iterations(coco128, tmp, zoo_config, semantic=True):
    """Two iterations of an HTC++ zoo config (tools/train.py) on coco128."""
    run = _write_override(coco128, tmp, zoo_config)
    config, work = run['config'], run['work']
    out = run_tool('tools/train.py', config, '--work-dir', work)
    assert re.search(r'Epoch\(train\) +\[1\]\[2/2\]', out), out[-3000:]
    assert ('loss_semantic_seg' in out) == semantic, out[-3000:]
    ckpt = osp.join(work, 'epoch_1.pth')
    assert osp.isfile(ckpt), out[-3000:]
    return dict(run, ckpt=ckpt)


@pytest.fixture(scope='module')
def trained(coco128, tmp_path_factory):
    return _train_two_iterations(coco128, tmp_path_factory.mktemp('htcpp'),
                                 ZOO['b'])


@pytest.mark.slow
def test_train_then_soft_nms_eval(trained):
    work = trained['work']
    out = run_tool('tools/test.py', trained['config'], trained['ckpt'],
                   '--work-dir', work)
    assert re.search(r'Epoch\(test\) \[4/4\]', out), out[-3000:]
    assert re.search(r'coco/bbox_mAP: [\d.]+', out), out[-3000:]
    assert re.search(r'coco/segm_mAP: [\d.]+', out), out[-3000:]
    # the run used the zoo config's soft-NMS
    dumped = glob.glob(osp.join(work, '*', 'vis_data', 'config.py'))
    assert dumped and all("type='soft_nms'" in open(p).read()
                          for p in dumped)


@pytest.fixture(scope='module')
def loss_step_l(coco128, tmp_path_factory):
    """HTC++ Swin-L (the zoo config with the semantic branch) as the Runner
    builds it from OVERRIDE, after one loss step; its weights saved in fp16
    (half the bytes; loading casts them to the model's fp32) for
    tools/test.py."""
    tmp = tmp_path_factory.mktemp('htcpp_l')
    run = _write_override(coco128, tmp, ZOO['l'])
    step = runner_loss_step(run['config'], run['work'])
    ckpt = str(tmp / 'swin_l_one_step.pth')
    torch.save({'state_dict': {k: v.half() if v.is_floating_point() else v
                               for k, v in step.model.state_dict().items()},
                'meta': {}}, ckpt)
    return dict(run, ckpt=ckpt, step=step)


def _assert_htc_step(step, semantic):
    losses = step.losses
    assert ('loss_semantic_seg' in losses) == semantic, sorted(losses)
    assert {f's{i}.loss_mask' for i in range(3)} <= set(losses), losses
    assert any(n.startswith('backbone.global_block.') for n in step.moved)
    assert any(n.startswith('roi_head.') for n in step.moved)


@pytest.mark.slow
def test_swin_l_loss_step(loss_step_l):
    """The Swin-L zoo config: its data path (InstaBoost, the thing-only
    semantic maps), model and optimizer as built, one step (Swin-B's run
    through the tools covers training and evaluating the family)."""
    _assert_htc_step(loss_step_l['step'], semantic=True)


@pytest.mark.slow
@pytest.mark.parametrize('config', [NO_SEMANTIC['b'], NO_SEMANTIC['l']],
                         ids=['without-semantic-b', 'without-semantic-l'])
def test_other_zoo_configs_loss_step(coco128, tmp_path, config):
    """The HTC++ configs without the semantic branch: one loss step on what
    the Runner builds (no semantic loss)."""
    run = _write_override(coco128, tmp_path, config)
    _assert_htc_step(runner_loss_step(run['config'], run['work']),
                     semantic=False)


TEST_DEV = osp.join(REPO, 'configs', 'swin', 'htc++_swin-l-p4-w7_fpn_'
                    'instaboost-ms-400-1400_6x_coco-test-dev.py')
TEST_DEV_OVERRIDE = '''\
_base_ = {zoo!r}
# the test-dev config at CPU scale on images without annotations
model = dict(backbone=dict(init_cfg=None),
             test_cfg=dict(rpn=dict(max_per_img=50),
                           rcnn=dict(score_thr=0.0, max_per_img=10)))
test_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, ann_file={info!r},
                 data_prefix=dict(img='images/'),
                 pipeline=[dict(s, scale=(320, 256)) if s['type'] == 'Resize'
                           else s for s in _base_.test_pipeline]))
test_evaluator = dict(ann_file={info!r}, outfile_prefix={prefix!r})
'''


@pytest.mark.slow
def test_test_dev_config_writes_server_files(loss_step_l, coco128,
                                             tmp_path):
    """The HTC++ Swin-L test-dev config: images with no annotations (an
    image_info file, as COCO ships test-dev), format-only output: COCO
    result json for boxes and masks, nothing evaluated."""
    from mmengine.config import Config
    cfg = Config.fromfile(TEST_DEV)
    assert cfg.test_evaluator.format_only
    assert cfg.test_evaluator.ann_file.endswith(
        'image_info_test-dev2017.json')
    assert cfg.test_dataloader.dataset.ann_file.endswith(
        'image_info_test-dev2017.json')
    assert all(t['type'] != 'LoadAnnotations'
               for t in cfg.test_dataloader.dataset.pipeline)
    assert all('LoadAnnotations' not in str(t) for t in cfg.tta_pipeline)
    with open(osp.join(coco128, 'annotations', 'instances.json')) as f:
        coco = json.load(f)
    images = coco['images'][:2]
    info = str(tmp_path / 'image_info.json')
    with open(info, 'w') as f:  # what image_info_test-dev2017.json holds
        json.dump(dict(images=images, categories=coco['categories']), f)
    prefix = str(tmp_path / 'results')
    config = str(tmp_path / 'test_dev.py')
    with open(config, 'w') as f:
        f.write(TEST_DEV_OVERRIDE.format(zoo=TEST_DEV, root=coco128 + '/',
                                         info=info, prefix=prefix))
    out = run_tool('tools/test.py', config, loss_step_l['ckpt'],
                   '--work-dir', str(tmp_path / 'work'))
    assert 'Average Precision' not in out, out[-3000:]
    ids = {i['id'] for i in images}
    for task in ('bbox', 'segm'):
        with open(f'{prefix}.{task}.json') as f:
            results = json.load(f)
        assert results and {r['image_id'] for r in results} <= ids
        assert all(r['category_id'] in {c['id'] for c in coco['categories']}
                   for r in results)
    assert 'counts' in results[0]['segmentation']  # RLE masks


@pytest.mark.slow
def test_tta_two_scales_and_flip(trained):
    out = run_tool('tools/test.py', trained['config'], trained['ckpt'],
                   '--work-dir', trained['work'], '--tta', '--cfg-options',
                   'test_dataloader.dataset.indices=2')
    assert re.search(r'Epoch\(test\) \[2/2\]', out), out[-3000:]
    assert re.search(r'coco/bbox_mAP: [\d.]+', out), out[-3000:]
    assert re.search(r'coco/segm_mAP: [\d.]+', out), out[-3000:]


@pytest.mark.slow
def test_tta_refused_without_tta_model(tmp_path):
    config = osp.join(REPO, 'configs', 'swin', 'cascade-mask-rcnn_swin-t-p4-'
                      'w7_fpn_giou-4conv1f_ms-crop-3x_coco.py')
    ckpt = tmp_path / 'any.pth'
    ckpt.write_bytes(b'')
    proc = subprocess.run(
        [sys.executable, 'tools/test.py', config, str(ckpt), '--tta'],
        cwd=REPO, env=ENV, capture_output=True, text=True)
    assert proc.returncode != 0
    assert '--tta' in proc.stderr and 'tta_model' in proc.stderr, \
        proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr


def test_tta_merges_masks_of_flipped_views():
    """InstanceSegTTAModel flips masks back with their boxes and keeps the
    mask of each detection that survives NMS across views."""
    from mmdet.structures import DetDataSample
    from mmengine.config import ConfigDict
    from mmengine.structures import InstanceData

    from mmvisattn.models.test_time_augs import InstanceSegTTAModel

    class Detector(torch.nn.Module):  # merging only: no detector runs
        def test_step(self, data):
            raise AssertionError

    tta = InstanceSegTTAModel(
        module=Detector(),
        tta_cfg=ConfigDict(nms=dict(type='nms', iou_threshold=0.5),
                           max_per_img=100))

    h, w = 8, 12
    mask = torch.zeros(h, w, dtype=torch.bool)
    mask[2:5, 1:4] = True  # object at x 1..4, y 2..5

    def view(flip, box, m, score):
        s = DetDataSample(metainfo=dict(
            img_id=1, ori_shape=(h, w), flip=flip,
            flip_direction='horizontal' if flip else None))
        s.pred_instances = InstanceData(
            bboxes=torch.tensor([box]), scores=torch.tensor([score]),
            labels=torch.tensor([3]), masks=m[None])
        return s

    flipped = view(True, [w - 4., 2., w - 1., 5.], mask.flip(-1), 0.9)
    plain = view(False, [1., 2., 4., 5.], mask, 0.6)
    other = view(False, [7., 0., 9., 2.], torch.zeros(h, w, dtype=bool), 0.5)
    other.pred_instances.labels[:] = 5
    merged = tta._merge_single_sample([flipped, plain, other])
    pred = merged.pred_instances
    assert pred.labels.tolist() == [3, 5]
    assert torch.allclose(pred.scores, torch.tensor([0.9, 0.5]))
    assert torch.allclose(pred.bboxes[0], torch.tensor([1., 2., 4., 5.]))
    assert torch.equal(pred.masks[0], mask)  # the flipped view's, unflipped
    assert pred.masks.shape == (2, h, w)
