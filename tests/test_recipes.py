"""Recipes as the authors released them, checked on what mmengine builds.

Part 1, a table: for each zoo config, the resolved values that define its
recipe, each row naming the authors' source it was read from (the released
config in its repository; the paper's section where nothing was released).
The values were read in those repositories (fetched mirrors of
microsoft/Swin-Transformer, SwinTransformer/Swin-Transformer-Object-
Detection and -Semantic-Segmentation, huawei-noah/Efficient-AI-Backbones)
and written here by hand.

Part 2, generic checks over every config under configs/, on the model and
optimizer built as mmengine's Runner builds them (the top-level
``data_preprocessor`` merged into the model with ``setdefault``; the optim
wrapper through mmengine's ``build_optim_wrapper``):
- the input is normalised, with the statistics the weights were trained on;
- every ``custom_keys`` / ``no_decay_names`` entry matches a parameter;
- weight decay is zero on exactly the parameters the recipe exempts, the
  exemption computed from the recipe's own rule, not from the config.
"""
import copy
import glob
import importlib
import logging
import math
import os.path as osp

import pytest
import torch.nn as nn
from mmengine.config import Config

from helpers import REPO, default_scope_guard, skip_weight_init

CONFIGS = osp.join(REPO, 'configs')
ALL = sorted(
    osp.relpath(p, CONFIGS)
    for p in glob.glob(osp.join(CONFIGS, '**', '*.py'), recursive=True)
    if '_base_' not in p)

SWIN_CLS = 'microsoft/Swin-Transformer'
SWIN_DET = 'SwinTransformer/Swin-Transformer-Object-Detection'
SWIN_SEG = 'SwinTransformer/Swin-Transformer-Semantic-Segmentation'
TNT = 'huawei-noah/Efficient-AI-Backbones'
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]
HALF = [127.5] * 3  # TNT: mean = std = 0.5 (tnt_pytorch/tnt.py default_cfg)


# ------------------------------------------------------------ part 1: table
def _swin_cls(yaml, dp, epochs, lr, wd, warmup, eta_min, test, **extra):
    """Values of a microsoft/Swin-Transformer classification run. ``lr`` and
    ``eta_min`` are main.py's linear scaling (BASE_LR x batch / 512) at the
    effective batch of get_started.md's command."""
    row = {
        'source': f'{SWIN_CLS}: configs/swin/{yaml}.yaml, config.py, '
                  'main.py, get_started.md',
        'model.backbone.drop_path_rate': dp,
        'train_cfg.max_epochs': epochs,
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': lr,
        'optim_wrapper.optimizer.weight_decay': wd,
        'optim_wrapper.optimizer.eps': 1e-8,
        'optim_wrapper.optimizer.betas': (0.9, 0.999),
        'optim_wrapper.clip_grad.max_norm': 5.0,  # TRAIN.CLIP_GRAD
        'param_scheduler.0.type': 'LinearLR',
        'param_scheduler.0.end': warmup,  # TRAIN.WARMUP_EPOCHS
        'param_scheduler.0.start_factor': 1e-3,  # WARMUP_LR / BASE_LR
        'param_scheduler.1.type': 'CosineAnnealingLR',  # cosine
        'param_scheduler.1.eta_min': eta_min,  # scaled MIN_LR
        'model.head.loss.label_smooth_val': 0.1,  # MODEL.LABEL_SMOOTHING
        'model.train_cfg.augments.0.alpha': 0.8,  # AUG.MIXUP
        'model.train_cfg.augments.1.alpha': 1.0,  # AUG.CUTMIX
        'test_dataloader.dataset.pipeline': test,  # TEST.CROP, bicubic
    }
    row.update(extra)
    return row


TEST_224 = [  # TEST.CROP True: resize int(256 / 224 * 224), centre crop 224
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow',
         interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs')]
TEST_384 = [  # TEST.CROP False: resize to 384 x 384
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=384, backend='pillow', interpolation='bicubic'),
    dict(type='PackInputs')]
# 1K: batch 1024 (128 x 8, or 64 x 8 x 2 steps), BASE_LR 5e-4, MIN_LR 5e-6
_IN1K = dict(epochs=300, lr=1e-3, wd=0.05, warmup=20, eta_min=1e-5,
             test=TEST_224)
# 22K: batch 4096 (64 x 8 x 8 steps), BASE_LR 1.25e-4, MIN_LR 1.25e-6
_IN22K = dict(epochs=90, lr=1e-3, wd=0.05, warmup=5, eta_min=1e-5,
              test=TEST_224)
# fine-tuning: batch 1024 (64 x 8 x 2 steps), BASE_LR 2e-5, MIN_LR 2e-7
_FT = dict(epochs=30, lr=4e-5, wd=1e-8, warmup=5, eta_min=4e-7)


def _swin_coco(release, dp, epochs, milestones):
    return {
        'source': f'{SWIN_DET}: configs/swin/{release}.py, '
                  'configs/_base_/schedules/schedule_1x.py',
        'model.backbone.drop_path_rate': dp,
        'model.backbone.window_size': 7,
        'train_cfg.max_epochs': epochs,
        'param_scheduler.1.milestones': milestones,  # lr_config.step
        'param_scheduler.0.end': 500,  # warmup_iters (schedule_1x)
        'param_scheduler.0.start_factor': 0.001,  # warmup_ratio
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': 1e-4,
        'optim_wrapper.optimizer.weight_decay': 0.05,
        'optim_wrapper.optimizer.betas': (0.9, 0.999),
        'optim_wrapper.paramwise_cfg.custom_keys': {
            'absolute_pos_embed': dict(decay_mult=0.),
            'relative_position_bias_table': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)},
        'train_dataloader.batch_size': 2,  # samples_per_gpu, 8 GPUs
        'test_dataloader.dataset.pipeline.1.scale': (1333, 800),
    }


def _swin_ade(release, dp):
    return {
        'source': f'{SWIN_SEG}: configs/swin/{release}.py, '
                  'configs/_base_/models/upernet_swin.py',
        'model.backbone.drop_path_rate': dp,
        'train_cfg.max_iters': 160000,
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': 6e-5,
        'optim_wrapper.optimizer.weight_decay': 0.01,
        'optim_wrapper.optimizer.betas': (0.9, 0.999),
        'param_scheduler.0.type': 'LinearLR',
        'param_scheduler.0.end': 1500,  # warmup_iters
        'param_scheduler.0.start_factor': 1e-6,  # warmup_ratio
        'param_scheduler.1.type': 'PolyLR',
        'param_scheduler.1.power': 1.0,
        'param_scheduler.1.eta_min': 0.0,
        'train_dataloader.batch_size': 2,  # samples_per_gpu, 8 GPUs
        'model.test_cfg.mode': 'whole',
        'model.auxiliary_head.loss_decode.loss_weight': 0.4,
        'test_dataloader.dataset.pipeline.1.scale': (2048, 512),
    }


def _tnt_cls(dp):
    return {
        'source': f'{TNT}: tnt_pytorch/readme.md (training command), '
                  'tnt_pytorch/tnt.py (default_cfg, no_weight_decay)',
        'model.backbone.drop_path_rate': dp,  # --drop-path .1
        'train_cfg.max_epochs': 300,  # --epochs 300
        'optim_wrapper.optimizer.type': 'AdamW',  # --opt adamw
        'optim_wrapper.optimizer.lr': 1e-3,  # --lr 1e-3 at 128 x 8
        'optim_wrapper.optimizer.weight_decay': 0.05,  # --weight-decay .05
        'optim_wrapper.optimizer.eps': 1e-8,  # --opt-eps 1e-8
        'auto_scale_lr.base_batch_size': 1024,
        'param_scheduler.0.end': 5,  # --warmup-epochs 5
        'param_scheduler.0.start_factor': 1e-3,  # --warmup-lr 1e-6
        'param_scheduler.1.type': 'CosineAnnealingLR',  # --sched cosine
        'param_scheduler.1.eta_min': 1e-5,  # train.py --min-lr default
        'train_dataloader.sampler.type': 'RepeatAugSampler',
        'data_preprocessor.mean': HALF,
        'data_preprocessor.std': HALF,
        'custom_hooks.1.type': 'EMAHook',  # --model-ema
        'custom_hooks.1.momentum': 4e-5,  # --model-ema-decay 0.99996
        'test_dataloader.dataset.pipeline.1.scale': 248,  # crop_pct 0.9
        'test_dataloader.dataset.pipeline.1.interpolation': 'bicubic',
    }


PAPER = 'Swin paper (Liu et al., ICCV 2021; arXiv 2103.14030v2)'
# RepPoints v2 of Table 2: the Swin authors' release
_RPD = ('reppoitsv2_swin_tiny_patch4_window7_mstrain_480_960_giou_gfocal_'
        'bifpn_adamw_3x_coco')


def _reppoints_bifpn(backbone_levels, **extra):
    row = _swin_coco(_RPD, 0.2, 36, [27, 33])
    row['source'] += ', configs/_base_/models/reppointsv2_swin_bifpn.py'
    row.update({
        'model.neck.type': 'mmvisattn.BiFPN',  # BiFPN
        'model.neck.in_channels': backbone_levels,
        'model.neck.out_channels': 256,
        'model.neck.num_outs': 5,
        'model.neck.num_repeat': 2,
        'model.neck.norm_cfg.type': 'GN',
        'model.bbox_head.loss_cls.type': 'QualityFocalLoss',  # RPDQFL
        'model.bbox_head.loss_cls.beta': 2.0,
        'model.bbox_head.loss_bbox_init.type': 'mmvisattn.LegacyGIoULoss',
        'model.bbox_head.loss_bbox_init.loss_weight': 1.0,
        'model.bbox_head.loss_bbox_refine.loss_weight': 2.0,
        'model.bbox_head.loss_fg.loss_weight': 0.1,  # loss_sem
        'model.bbox_head.loss_heatmap.loss_weight': 0.25,
        'model.bbox_head.corner_channels': 64,  # corner_dim
        'model.train_cfg.refine.assigner.topk': 9,
        'model.test_cfg.nms.iou_threshold': 0.6,
        'model.test_cfg.score_thr': 0.05,
        'model.test_cfg.nms_pre': 1000,
        'optim_wrapper.clip_grad': None,  # grad_clip=None
        'train_dataloader.dataset.pipeline.2.scales': [
            (short, 1333) for short in range(480, 961, 32)],
    })
    row.update(extra)
    return row


def _paper_dense(section, dp, epochs, milestones, batch=2):
    """What the paper states for a detector it did not release (Sec. 4.2,
    App. A2.2): AdamW lr 1e-4, wd 0.05, batch 16, the schedule."""
    row = {
        'source': f'{PAPER}, {section} (no released config)',
        'train_cfg.max_epochs': epochs,
        'param_scheduler.1.milestones': milestones,
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': 1e-4,
        'optim_wrapper.optimizer.weight_decay': 0.05,
        'train_dataloader.batch_size': batch,
    }
    if dp is not None:
        row['model.backbone.drop_path_rate'] = dp
    return row


def _paper_ade640():
    """App. A2.3 for the 640x640 ImageNet-22K models (no release): AdamW
    lr 6e-5, wd 0.01, 1500 warm-up iterations, linear decay, 160K
    iterations, batch 16."""
    return {
        'source': f'{PAPER}, Sec. 4.3 and App. A2.3 (no released config)',
        'train_cfg.max_iters': 160000,
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': 6e-5,
        'optim_wrapper.optimizer.weight_decay': 0.01,
        'param_scheduler.0.end': 1500,
        'param_scheduler.1.type': 'PolyLR',
        'param_scheduler.1.power': 1.0,
        'train_dataloader.batch_size': 2,
        'test_dataloader.dataset.pipeline.1.scale': (2560, 640),
    }


RECIPES = {
    'swin/reppoints-v2_swin-t-p4-w7_bifpn_giou-qfl_ms-480-960-3x_coco.py':
    _reppoints_bifpn([192, 384, 768]),
    # Table 2(a)'s R-50 row: the same model and recipe on ResNet-50
    'swin/reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py':
    {k: v for k, v in _reppoints_bifpn([512, 1024, 2048]).items()
     if k not in ('model.backbone.drop_path_rate',
                  'model.backbone.window_size')},
    'swin/atss_swin-t-p4-w7_fpn_ms-3x_coco.py':
    _paper_dense('Sec. 4.2, Table 2(a), App. A2.2', 0.2, 36, [27, 33]),
    'swin/atss_r50_fpn_ms-3x_coco.py':
    _paper_dense('Sec. 4.2, Table 2(a), App. A2.2', None, 36, [27, 33]),
    'swin/sparse-rcnn_swin-t-p4-w7_fpn_300-proposals_ms-3x_coco.py':
    _paper_dense('Sec. 4.2, Table 2(a), App. A2.2', 0.2, 36, [27, 33]),
    'swin/sparse-rcnn_r50_fpn_300-proposals_ms-3x_coco.py':
    _paper_dense('Sec. 4.2, Table 2(a), App. A2.2', None, 36, [27, 33]),
    'swin/cascade-mask-rcnn_r50_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    _paper_dense('Sec. 4.2, Table 2(a), App. A2.2', None, 36, [27, 33]),
    # HTC++: 6x (72 epochs, x0.1 at 63 and 69), drop path 0.2, soft-NMS
    'swin/htc++_swin-b-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py': dict(
        _paper_dense('App. A2.2 (HTC++)', 0.2, 72, [63, 69], batch=1),
        **{'model.test_cfg.rcnn.nms.type': 'soft_nms'}),
    'swin/htc++_swin-l-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py': dict(
        _paper_dense('App. A2.2 (HTC++)', 0.2, 72, [63, 69], batch=1),
        **{'model.test_cfg.rcnn.nms.type': 'soft_nms'}),
    'swin/upernet_swin-b-p4-w7_8xb2-160k_ade20k-640x640.py': _paper_ade640(),
    'swin/upernet_swin-l-p4-w12_8xb2-160k_ade20k-640x640.py': _paper_ade640(),
    'swin/swin-t-p4-w7_16xb64_300e_in1k.py':
    _swin_cls('swin_tiny_patch4_window7_224', 0.2, **_IN1K),
    'swin/swin-s-p4-w7_16xb64_300e_in1k.py':
    _swin_cls('swin_small_patch4_window7_224', 0.3, **_IN1K),
    'swin/swin-b-p4-w7_16xb64_300e_in1k.py':
    _swin_cls('swin_base_patch4_window7_224', 0.5, **_IN1K),
    'swin/swin-b-p4-w7_64xb64_90e_in22k.py':
    _swin_cls('swin_base_patch4_window7_224_22k', 0.2, **_IN22K),
    'swin/swin-l-p4-w7_64xb64_90e_in22k.py':
    _swin_cls('swin_large_patch4_window7_224_22k', 0.2, **_IN22K),
    'swin/swin-b-p4-w7_in22k-pre_16xb64_30e_in1k.py':
    _swin_cls('swin_base_patch4_window7_224_22kto1k_finetune', 0.2,
              test=TEST_224, **_FT),
    'swin/swin-l-p4-w7_in22k-pre_16xb64_30e_in1k.py':
    _swin_cls('swin_large_patch4_window7_224_22kto1k_finetune', 0.2,
              test=TEST_224, **_FT),
    'swin/swin-b-p4-w12_16xb64_30e_in1k-384px.py':
    _swin_cls('swin_base_patch4_window12_384_finetune', 0.5, test=TEST_384,
              **_FT, **{'model.backbone.window_size': 12}),
    'swin/swin-b-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py':
    _swin_cls('swin_base_patch4_window12_384_22kto1k_finetune', 0.2,
              test=TEST_384, **_FT, **{'model.backbone.window_size': 12}),
    'swin/swin-l-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py':
    _swin_cls('swin_large_patch4_window12_384_22kto1k_finetune', 0.2,
              test=TEST_384, **_FT, **{'model.backbone.window_size': 12}),
    'swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py':
    _swin_coco('cascade_mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_'
               'giou_4conv1f_adamw_1x_coco', 0.0, 12, [8, 11]),
    'swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    _swin_coco('cascade_mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_'
               'giou_4conv1f_adamw_3x_coco', 0.2, 36, [27, 33]),
    'swin/cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    _swin_coco('cascade_mask_rcnn_swin_small_patch4_window7_mstrain_480-800_'
               'giou_4conv1f_adamw_3x_coco', 0.2, 36, [27, 33]),
    'swin/cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    _swin_coco('cascade_mask_rcnn_swin_base_patch4_window7_mstrain_480-800_'
               'giou_4conv1f_adamw_3x_coco', 0.3, 36, [27, 33]),
    'swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py':
    _swin_coco('mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_adamw_1x_'
               'coco', 0.1, 12, [8, 11]),
    'swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py':
    _swin_coco('mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_adamw_3x_'
               'coco', 0.2, 36, [27, 33]),
    'swin/mask-rcnn_swin-s-p4-w7_fpn_ms-crop-3x_coco.py':
    _swin_coco('mask_rcnn_swin_small_patch4_window7_mstrain_480-800_adamw_3x_'
               'coco', 0.2, 36, [27, 33]),
    'swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py':
    _swin_ade('upernet_swin_tiny_patch4_window7_512x512_160k_ade20k', 0.3),
    'swin/upernet_swin-s-p4-w7_8xb2-160k_ade20k-512x512.py':
    _swin_ade('upernet_swin_small_patch4_window7_512x512_160k_ade20k', 0.3),
    'swin/upernet_swin-b-p4-w7_8xb2-160k_ade20k-512x512.py':
    _swin_ade('upernet_swin_base_patch4_window7_512x512_160k_ade20k', 0.3),
    'tnt/tnt-s-p16_16xb64_300e_in1k.py': _tnt_cls(0.1),
}


def _resolve(cfg, path):
    node = cfg
    for part in path.split('.'):
        node = node[int(part)] if part.isdigit() else node[part]
    return node


def _plain(value):
    if hasattr(value, 'to_dict'):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _same(got, want):
    got, want = _plain(got), _plain(want)
    if isinstance(want, float) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    return got == want


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_config_is_the_authors_recipe(name):
    row = dict(RECIPES[name])
    assert row.pop('source')
    cfg = Config.fromfile(osp.join(CONFIGS, name))
    wrong = {}
    for path, want in row.items():
        try:
            got = _resolve(cfg, path)
        except (KeyError, IndexError, TypeError, AttributeError):
            got = '<missing>'
        if not _same(got, want):
            wrong[path] = (_plain(got), want)
    assert not wrong, f'{name} differs from {RECIPES[name]["source"]}: ' \
        + '; '.join(f'{k}: config {g!r}, recipe {w!r}'
                    for k, (g, w) in wrong.items())


def test_every_recipe_row_names_an_existing_config():
    for name, row in RECIPES.items():
        assert osp.isfile(osp.join(CONFIGS, name)), name
        # a released config (repo: path), or the paper's section where
        # nothing was released
        assert row['source'].split(':')[0] in (
            SWIN_CLS, SWIN_DET, SWIN_SEG, TNT) or (
                row['source'].startswith(PAPER)
                and 'no released config' in row['source']), row['source']


# --------------------------------------------- part 2: what the Runner builds
_BUILT = {}


def built(name):
    """(cfg, model, optimizer) as mmengine's Runner builds them."""
    if name not in _BUILT:
        from mmengine.optim import build_optim_wrapper
        from mmengine.registry import MODELS, DefaultScope

        import mmvisattn  # noqa: F401
        cfg = Config.fromfile(osp.join(CONFIGS, name))
        scope = cfg.get('default_scope', 'mmengine')
        importlib.import_module(f'{scope}.utils').register_all_modules(False)
        model_cfg = copy.deepcopy(cfg.model)
        if cfg.get('data_preprocessor') is not None:  # Runner.build_model
            model_cfg.setdefault('data_preprocessor',
                                 copy.deepcopy(cfg.data_preprocessor))
        from mmengine.logging import MMLogger
        logger = MMLogger.get_current_instance()  # one line per parameter
        level = logger.level
        logger.setLevel(logging.WARNING)
        try:
            # the checks read names, groups and flags, never values
            with default_scope_guard(), skip_weight_init(), \
                    DefaultScope.overwrite_default_scope(scope):
                model = MODELS.build(model_cfg)
                wrapper = build_optim_wrapper(
                    model, copy.deepcopy(cfg.optim_wrapper))
        finally:
            logger.setLevel(level)
        _BUILT.clear()  # one model at a time: the largest are 280M params
        _BUILT[name] = cfg, model, wrapper.optimizer
    return _BUILT[name]


def _is_classifier(name):
    return 'in1k' in name or 'in22k' in name


def _family(name):
    if name in PLAIN_DECAY:
        return 'plain'
    if name.startswith('swin_v2/'):
        return 'swinv2_cls' if _is_classifier(name) else 'swinv2_dense'
    if name.startswith('tnt/') or 'tnt-s_shapes' in name:
        return 'tnt_cls' if _is_classifier(name) else 'tnt_dense'
    return 'swin_cls' if _is_classifier(name) else 'swin_dense'


# configs whose recipe decays every parameter alike, with where it is from
PLAIN_DECAY = {
    'rswatt/retinanet_r50-rswatt-neck_fpn_1x_coco.py':
    "mmdet's retinanet_r50_fpn_1x_coco (SGD, weight decay 1e-4 on all)",
    'rswatt/rswatt-vit-b6-p16_1xb32-10e_cifar10-224px.py':
    "the RSWAtt source's CIFAR-10 example (AdamW over all parameters)",
}
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)
# family -> (the rule that exempts a parameter from weight decay, source)
EXEMPT = {
    # set_weight_decay: 1-D, bias, no_weight_decay() / _keywords()
    'swin_cls': (lambda n, p, norm: p.ndim <= 1 or n.endswith('.bias')
                 or 'absolute_pos_embed' in n
                 or 'relative_position_bias_table' in n,
                 f'{SWIN_CLS}: optimizer.py set_weight_decay'),
    # mmcv 1.x DefaultOptimizerConstructor: custom_keys as substrings
    'swin_dense': (lambda n, p, norm: any(
        k in n for k in ('absolute_pos_embed', 'relative_position_bias_table',
                         'norm')),
                   f'{SWIN_DET} / {SWIN_SEG}: optimizer.paramwise_cfg'),
    # the V2 code's set_weight_decay with its no_weight_decay_keywords
    'swinv2_cls': (lambda n, p, norm: p.ndim <= 1 or n.endswith('.bias')
                   or any(k in n for k in ('absolute_pos_embed', 'cpb_mlp',
                                           'logit_scale')),
                   f'{SWIN_CLS}: optimizer.py set_weight_decay, '
                   'models/swin_transformer_v2.py no_weight_decay_keywords'),
    # the V1 dense recipe plus the V2 keywords (configs/swin_v2/README.md)
    'swinv2_dense': (lambda n, p, norm: any(
        k in n for k in ('absolute_pos_embed', 'norm', 'cpb_mlp',
                         'logit_scale')),
                     f'{SWIN_DET} / {SWIN_SEG}: optimizer.paramwise_cfg, '
                     'and the V2 no_weight_decay_keywords'),
    # timm add_weight_decay (train.py create_optimizer) + no_weight_decay()
    'tnt_cls': (lambda n, p, norm: p.ndim <= 1 or n.endswith('.bias')
                or any(k in n for k in ('cls_token', 'sentence_pos',
                                        'word_pos')),
                f'{TNT}: tnt_pytorch/train.py, tnt.py no_weight_decay'),
    # one weight decay on every parameter: PLAIN_DECAY's recipes
    'plain': (lambda n, p, norm: False,
              "the recipe's own optimizer: no paramwise_cfg"),
    # ours (no detection/segmentation release): ViTDet-style layer decay,
    # no decay on norms, position embeddings and the class token
    'tnt_dense': (lambda n, p, norm: norm or any(
        k in n for k in ('cls_token', 'sentence_pos', 'word_pos')),
                  'mmvisattn LayerDecayOptimWrapperConstructor (documented '
                  'in configs/tnt/README.md)'),
}

# custom keys that may match nothing, with the reason
UNMATCHED_OK = {
    'absolute_pos_embed': "the release's rule for the absolute-position "
                          'variant (ape=True); these models have none',
    '.absolute_pos_embed': "mmpretrain's swin rule, the same key",
}
# the R-50 baselines share the Swin schedule unchanged (paper section 4.2:
# the same settings for every backbone of Table 2(a))
UNMATCHED_OK_R50 = {'relative_position_bias_table', 'norm'}
# the ablations keep their main config's rule (one switch each); those
# without a relative bias (Table 4: no pos., abs. pos.; Table 6: Performer)
# have no table for it to match
NO_RELATIVE_BIAS = ('-nopos_', '-abspos_', '-performer_')
UNMATCHED_OK_ABLATION = {'relative_position_bias_table',
                         '.relative_position_bias_table'}


@pytest.mark.parametrize('name', ALL)
def test_built_model_and_optimizer_follow_the_recipe(name):
    """The three generic checks on one build of the config (building is
    what costs: the largest models have 280M parameters)."""
    _check_normalised(name)
    _check_paramwise_keys_match(name)
    _check_weight_decay_exemptions(name)


def _check_normalised(name):
    cfg, model, _ = built(name)
    pre = model.data_preprocessor
    assert getattr(pre, '_enable_normalize', False), \
        f'{name}: the built model does not normalise its input'
    want = HALF if _family(name).startswith('tnt') and 'shapes' not in name \
        else IMAGENET_MEAN
    mean = pre.mean.flatten().tolist()
    assert mean == pytest.approx(want), (name, mean)
    std = pre.std.flatten().tolist()
    assert std == pytest.approx(HALF if want == HALF else IMAGENET_STD), \
        (name, std)


def _check_paramwise_keys_match(name):
    cfg, model, _ = built(name)
    pw = cfg.optim_wrapper.get('paramwise_cfg') or {}
    keys = list(pw.get('custom_keys') or {}) + list(
        pw.get('no_decay_names') or [])
    names = [n for n, _ in model.named_parameters()]
    r50 = 'r50' in name and 'rswatt' not in name
    no_table = 'ablations/' in name and any(t in name
                                             for t in NO_RELATIVE_BIAS)
    unmatched = [
        k for k in keys if not any(k in n for n in names)
        and k not in UNMATCHED_OK and not (r50 and k in UNMATCHED_OK_R50)
        and not (no_table and k in UNMATCHED_OK_ABLATION)]
    assert not unmatched, \
        f'{name}: paramwise keys that match no parameter: {unmatched}'


def _check_weight_decay_exemptions(name):
    cfg, model, optimizer = built(name)
    rule, source = EXEMPT[_family(name)]
    norm_params = {id(p) for m in model.modules() if isinstance(m, _NORMS)
                   for p in m.parameters(recurse=False)}
    zero = set()
    for group in optimizer.param_groups:
        if group.get('weight_decay', 0) == 0:
            zero.update(id(p) for p in group['params'])
    wrong_zero, wrong_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        exempt = rule(n, p, id(p) in norm_params)
        if (id(p) in zero) != exempt:
            (wrong_zero if id(p) in zero else wrong_decay).append(n)
    assert not wrong_zero and not wrong_decay, (
        f'{name} against {source}: no decay but the recipe decays '
        f'{wrong_zero[:6]}; decayed but the recipe exempts '
        f'{wrong_decay[:6]}')
    assert any(g.get('weight_decay', 0) > 0 for g in optimizer.param_groups)
