# A downstream project's detector: the Swin paper's Cascade Mask R-CNN Swin-T
# (mmvisattn's config, inherited through Python's imports), with this
# project's head (3 classes) and dataset (the generated shapes), sized for a
# few iterations on a CPU. It runs under mmdet's own tools and `mim`:
#   python "$MMDET_TOOLS/train.py" configs/cascade-mask-rcnn_swin-t_shapes.py
# (README.md beside this folder has every command).
from mmengine.config import read_base

with read_base():
    from mmvisattn.configs.swin.cascade_mask_rcnn_swin_t_p4_w7_fpn_giou_4conv1f_ms_crop_3x_coco import *  # noqa: E501,F401,F403

from mmvisattn.engine import SafeCheckpointLoadingHook

classes = ('square', 'circle', 'triangle')
data_root = 'data/shapes/'
image_size = (160, 160)
max_iters = 4

# the head: our classes; from scratch (no ImageNet download in this example)
model.backbone.init_cfg = None
model.roi_head.bbox_head = [
    dict(head, num_classes=len(classes)) for head in model.roi_head.bbox_head
]
model.roi_head.mask_head.num_classes = len(classes)
# fewer proposals and RoI samples: the RoI heads dominate a CPU step; every
# detection kept at test time (a few iterations from scratch score low)
model.train_cfg.rpn_proposal.update(nms_pre=1000, max_per_img=256)
model.train_cfg.rcnn = [
    dict(stage, sampler=dict(stage.sampler, num=32))
    for stage in model.train_cfg.rcnn
]
model.test_cfg.rpn.update(nms_pre=500, max_per_img=100)
model.test_cfg.rcnn.update(score_thr=0.0, max_per_img=20)

# the dataset: the shapes in COCO's layout
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                    'scale_factor')),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='CocoDataset',
        data_root=data_root,
        metainfo=dict(classes=classes),
        ann_file='annotations/instances_train.json',
        data_prefix=dict(img='images/train/'),
        filter_cfg=dict(filter_empty_gt=True, min_size=4),
        pipeline=train_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='CocoDataset',
        data_root=data_root,
        metainfo=dict(classes=classes),
        ann_file='annotations/instances_val.json',
        data_prefix=dict(img='images/val/'),
        test_mode=True,
        pipeline=test_pipeline))
test_evaluator = dict(
    type='CocoMetric',
    ann_file=data_root + 'annotations/instances_val.json',
    metric=['bbox', 'segm'])
val_dataloader = val_evaluator = val_cfg = None  # tested by tools/test.py

# a few iterations, a checkpoint every 2: train, then resume
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
optim_wrapper.optimizer.lr = 1e-4
default_hooks.checkpoint = dict(type='CheckpointHook', by_epoch=False,
                                interval=2, max_keep_ckpts=1)
default_hooks.logger.interval = 1
log_processor = dict(by_epoch=False)
# torch's safe loader reads mmengine checkpoints while the runner loads
# (resume, load_from, tools/test.py's checkpoint), under any entry point
custom_hooks = [dict(type=SafeCheckpointLoadingHook)]
