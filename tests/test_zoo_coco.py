"""Every COCO detection config of the Swin zoo (configs/swin/): its recipe as
mmengine resolves it, its metafile entry, and a run on coco128.

The run inherits the config, by absolute path, in a small override written
in tmp_path (tests/helpers/coco128.py) that keeps the zoo model and its
augmentation pipeline but shrinks the data: 2 coco128 images from
../shared/data (a grayscale one, and one with many small objects and a crowd
region), 1 image per batch, images at 0.3x the recipe's scales, fewer
proposals and sampled RoIs, random initialisation. One config per model
family trains 2 iterations through tools/train.py and is evaluated by
tools/test.py with mmdet's CocoMetric; every other config takes one loss
step on what the Runner builds from the same override.
"""
import glob
import os.path as osp

import pytest
import yaml
from mmengine.config import Config

from helpers import REPO
from helpers.coco128 import loss_step_on_coco128, train_and_evaluate_on_coco128

ZOO_DIR = osp.join(REPO, 'configs', 'swin')

# Every COCO detection / instance segmentation config of the zoo. Add new
# ones here (or to EXCLUDED with the reason): test_zoo_list_is_complete
# fails for a configs/swin/*_coco.py file that is in neither.
ZOO_CONFIGS = [
    'cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py',
    'cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
    'cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py',
    'cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
    'cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py',
    'cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
    'cascade-mask-rcnn_r50_fpn_giou-4conv1f_ms-crop-3x_coco.py',
    'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py',
    'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py',
    'mask-rcnn_swin-s-p4-w7_fpn_ms-crop-3x_coco.py',
    'atss_swin-t-p4-w7_fpn_ms-3x_coco.py',
    'atss_r50_fpn_ms-3x_coco.py',
    'sparse-rcnn_swin-t-p4-w7_fpn_300-proposals_ms-3x_coco.py',
    'sparse-rcnn_r50_fpn_300-proposals_ms-3x_coco.py',
    'reppoints-v2_swin-t-p4-w7_fpn_giou_ms-3x_coco.py',
    'reppoints-v2_r50_fpn_giou_ms-3x_coco.py',
    'reppoints-v2_swin-t-p4-w7_bifpn_giou-qfl_ms-480-960-3x_coco.py',
    'reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py',
]

# configs/swin/*_coco.py files deliberately not run here: name -> reason.
# The HTC++ configs (Table 2(c)/3) belong to tests/test_htcpp.py, which
# checks the recipe of all four.
EXCLUDED = {
    'htc++_swin-b-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py':
    'needs COCO-stuff semantic maps, which coco128 lacks; tests/test_htcpp.py '
    'trains and tests it on coco128 with thing-only maps it renders',
    'htc++_swin-l-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py':
    'needs COCO-stuff semantic maps, which coco128 lacks; tests/test_htcpp.py '
    'trains and tests it on coco128 with thing-only maps it renders',
    'htc++-without-semantic_swin-b-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py':
    'HTC++ variant: tests/test_htcpp.py trains and tests it on coco128',
    'htc++-without-semantic_swin-l-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py':
    'HTC++ variant: tests/test_htcpp.py trains and tests it on coco128',
}

# What each config must say (the paper's Table 2 recipe): backbone
# (Swin arch or ResNet depth), drop path, epochs and lr milestones, whether
# it predicts masks.
_3X, _1X = (36, [27, 33]), (12, [8, 11])
SPEC = {
    'cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py':
    dict(arch='tiny', drop_path=0.0, sched=_1X, mask=True),
    'cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch='tiny', drop_path=0.2, sched=_3X, mask=True),
    'cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py':
    dict(arch='small', drop_path=0.2, sched=_1X, mask=True),
    'cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch='small', drop_path=0.2, sched=_3X, mask=True),
    'cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py':
    dict(arch='base', drop_path=0.3, sched=_1X, mask=True),
    'cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch='base', drop_path=0.3, sched=_3X, mask=True),
    'cascade-mask-rcnn_r50_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch=50, drop_path=None, sched=_3X, mask=True),
    # the authors' Mask R-CNN releases (drop path of their configs)
    'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py':
    dict(arch='tiny', drop_path=0.1, sched=_1X, mask=True),
    'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py':
    dict(arch='tiny', drop_path=0.2, sched=_3X, mask=True),
    'mask-rcnn_swin-s-p4-w7_fpn_ms-crop-3x_coco.py':
    dict(arch='small', drop_path=0.2, sched=_3X, mask=True),
    'atss_swin-t-p4-w7_fpn_ms-3x_coco.py':
    dict(arch='tiny', drop_path=0.2, sched=_3X, mask=False),
    'atss_r50_fpn_ms-3x_coco.py':
    dict(arch=50, drop_path=None, sched=_3X, mask=False),
    'sparse-rcnn_swin-t-p4-w7_fpn_300-proposals_ms-3x_coco.py':
    dict(arch='tiny', drop_path=0.2, sched=_3X, mask=False),
    'sparse-rcnn_r50_fpn_300-proposals_ms-3x_coco.py':
    dict(arch=50, drop_path=None, sched=_3X, mask=False),
    'reppoints-v2_swin-t-p4-w7_fpn_giou_ms-3x_coco.py':
    dict(arch='tiny', drop_path=0.2, sched=_3X, mask=False),
    'reppoints-v2_r50_fpn_giou_ms-3x_coco.py':
    dict(arch=50, drop_path=None, sched=_3X, mask=False),
    # the Swin authors' RepPoints v2 (Table 2): BiFPN on C3-C5
    'reppoints-v2_swin-t-p4-w7_bifpn_giou-qfl_ms-480-960-3x_coco.py':
    dict(arch='tiny', drop_path=0.2, sched=_3X, mask=False, bifpn=True),
    'reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py':
    dict(arch=50, drop_path=None, sched=_3X, mask=False, bifpn=True),
}
NECK_IN = {'tiny': [96, 192, 384, 768], 'small': [96, 192, 384, 768],
           'base': [128, 256, 512, 1024], 50: [256, 512, 1024, 2048]}
SWIN_URL = ('https://github.com/SwinTransformer/storage/releases/download/'
            'v1.0.0/swin_{}_patch4_window7_224.pth')


def test_zoo_list_is_complete():
    found = {osp.basename(p) for p in glob.glob(osp.join(ZOO_DIR, '*_coco.py'))}
    listed = set(ZOO_CONFIGS)
    assert len(listed) == len(ZOO_CONFIGS), 'duplicates in ZOO_CONFIGS'
    assert not listed & set(EXCLUDED), 'both tested and excluded'
    assert all(EXCLUDED.values()), 'every exclusion needs its reason'
    untested = found - listed - set(EXCLUDED)
    assert not untested, (
        f'configs/swin/ configs neither in ZOO_CONFIGS nor in EXCLUDED: '
        f'{sorted(untested)}')
    missing = (listed | set(EXCLUDED)) - found
    assert not missing, f'listed but not in configs/swin/: {sorted(missing)}'
    assert set(SPEC) == listed


def test_metafile_has_every_zoo_config():
    # format, names and paths of every metafile: tests/test_metafiles.py
    with open(osp.join(ZOO_DIR, 'metafile.yml')) as f:
        meta = yaml.safe_load(f)
    entries = {m['Config']: m for m in meta['Models']}
    for name in ZOO_CONFIGS:
        entry = entries.get(f'configs/swin/{name}')
        assert entry is not None, f'{name} has no metafile.yml entry'
        assert entry['Metadata']['Epochs'] == SPEC[name]['sched'][0]
        assert entry['Metadata']['Batch Size'] == 16


@pytest.mark.parametrize('name', ZOO_CONFIGS)
def test_zoo_config_recipe(name):
    """The paper's recipe, read from the config as mmengine resolves it."""
    spec = SPEC[name]
    cfg = Config.fromfile(osp.join(ZOO_DIR, name))
    backbone = cfg.model.backbone
    if spec['arch'] == 50:
        assert backbone.type == 'ResNet' and backbone.depth == 50
        assert backbone.init_cfg.checkpoint == 'torchvision://resnet50'
    else:
        assert backbone.type == 'mmvisattn.SwinTransformer'
        assert backbone.arch == spec['arch'] and backbone.window_size == 7
        assert backbone.drop_path_rate == spec['drop_path']
        assert backbone.init_cfg.checkpoint == SWIN_URL.format(spec['arch'])
        assert 'mmvisattn' in cfg.custom_imports.imports
    # the BiFPN takes C3-C5, the FPNs C2-C5
    levels = (1, 2, 3) if spec.get('bifpn') else (0, 1, 2, 3)
    assert tuple(backbone.out_indices) == levels
    assert cfg.model.neck.in_channels == [
        NECK_IN[spec['arch']][i] for i in levels]
    epochs, milestones = spec['sched']
    assert cfg.train_cfg.max_epochs == epochs
    assert cfg.param_scheduler[-1].milestones == milestones
    # One Swin schedule for every COCO config: the R-50 configs hold a copy
    # (mmengine refuses the same key from two sibling bases), which must not
    # drift from configs/_base_/schedules.
    recipe = Config.fromfile(osp.join(
        REPO, 'configs', '_base_', 'schedules',
        {12: 'adamw_1x.py', 36: 'adamw_3x.py'}[epochs]))
    assert cfg.param_scheduler == recipe.param_scheduler
    assert cfg.auto_scale_lr == recipe.auto_scale_lr
    wrapper = cfg.optim_wrapper.to_dict()
    # gradient clipping kept from each framework's own config
    # (the Swin authors' RepPoints v2 release has none)
    clip = {'SparseRCNN': 1, 'mmvisattn.RepPointsV2Detector': 35}
    assert wrapper.pop('clip_grad', None) == (
        dict(max_norm=clip[cfg.model.type], norm_type=2)
        if cfg.model.type in clip and not spec.get('bifpn') else None)
    assert wrapper == recipe.optim_wrapper.to_dict()
    optimizer = cfg.optim_wrapper.optimizer
    assert optimizer.type == 'AdamW' and optimizer.lr == 1e-4
    assert optimizer.weight_decay == 0.05
    assert cfg.train_dataloader.batch_size * 8 == 16
    # multi-scale training, short side 480..800, long side <= 1333
    scales = set()

    def collect(t):
        if isinstance(t, list):
            return [collect(x) for x in t]
        if t.type == 'RandomChoiceResize':
            scales.update(map(tuple, t.scales))
        for x in t.get('transforms', []):
            collect(x)

    collect(list(cfg.train_dataloader.dataset.pipeline))
    ms = {(s, 1333) for s in range(480, 801, 32)}
    if spec.get('bifpn'):  # the release trains up to 960
        ms = {(s, 1333) for s in range(480, 961, 32)}
        assert ms == scales, sorted(scales)
    assert ms <= scales, sorted(scales)
    assert ('segm' in cfg.test_evaluator.metric) == spec['mask']
    if cfg.model.type == 'ATSS':
        assert cfg.model.neck.start_level == 1
        assert cfg.model.neck.add_extra_convs == 'on_output'
    if cfg.model.type == 'mmvisattn.RepPointsV2Detector':
        head = cfg.model.bbox_head
        assert head.type == 'mmvisattn.RepPointsV2Head'
        assert cfg.model.train_cfg.refine.assigner.type == 'ATSSAssigner'
        if spec.get('bifpn'):
            # the Swin authors' model: BiFPN x2 with GN, quality focal
            # loss, legacy GIoU
            neck = cfg.model.neck
            assert (neck.type, neck.num_outs, neck.num_repeat,
                    neck.out_channels) == ('mmvisattn.BiFPN', 5, 2, 256)
            assert neck.norm_cfg.type == 'GN' and neck.get('act_cfg') is None
            assert (head.loss_cls.type, head.loss_cls.beta) == (
                'QualityFocalLoss', 2.0)
            assert [(loss.type, loss.loss_weight)
                    for loss in (head.loss_bbox_init, head.loss_bbox_refine)
                    ] == [('mmvisattn.LegacyGIoULoss', 1.0),
                          ('mmvisattn.LegacyGIoULoss', 2.0)]
        else:
            # the RepPoints v2 authors' neck: P3-P7 with P6 from C5, GN
            assert cfg.model.neck.start_level == 1
            assert cfg.model.neck.add_extra_convs == 'on_input'
    if cfg.model.type == 'SparseRCNN':
        assert cfg.model.rpn_head.num_proposals == 300
    # a downstream config can inherit it and read the recipe back
    assert cfg.default_scope == 'mmdet'


# One config per model family runs end to end through the tools; the
# families' other configs build the same heads with another backbone size or
# schedule. Cascade Mask R-CNN's end-to-end run is
# tests/test_tools.py::test_coco128_train_then_test (the main config, shrunk
# through --cfg-options); Mask R-CNN's are the release checkpoints evaluated
# by tools/test.py in tests/test_release_checkpoints.py.
END_TO_END = [
    'atss_swin-t-p4-w7_fpn_ms-3x_coco.py',
    'sparse-rcnn_swin-t-p4-w7_fpn_300-proposals_ms-3x_coco.py',
    'reppoints-v2_swin-t-p4-w7_bifpn_giou-qfl_ms-480-960-3x_coco.py',
]


@pytest.mark.slow
@pytest.mark.parametrize('name', END_TO_END)
def test_zoo_config_train_then_test_on_coco128(name, tmp_path):
    train_and_evaluate_on_coco128(osp.join(ZOO_DIR, name), tmp_path,
                                  mask=SPEC[name]['mask'])


@pytest.mark.slow
@pytest.mark.parametrize(
    'name', [n for n in ZOO_CONFIGS if n not in END_TO_END])
def test_zoo_config_loss_step_on_coco128(name, tmp_path):
    loss_step_on_coco128(osp.join(ZOO_DIR, name), tmp_path,
                         mask=SPEC[name]['mask'])
