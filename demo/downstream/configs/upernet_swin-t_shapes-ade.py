# A downstream project's segmentor: the Swin paper's UperNet Swin-T
# (mmvisattn's config, inherited through Python's imports) with this
# project's classes and dataset (the shapes in ADE20K's layout), sized for a
# few iterations on a CPU, under mmseg's own tools (README.md beside this
# folder).
from mmengine.config import read_base

with read_base():
    from mmvisattn.configs.swin.upernet_swin_t_p4_w7_8xb2_160k_ade20k_512x512 import *  # noqa: E501,F401,F403

from mmvisattn.engine import SafeCheckpointLoadingHook

classes = ('square', 'circle', 'triangle')
data_root = 'data/shapes/ade/'
crop_size = (128, 128)
max_iters = 4

model.backbone.init_cfg = None
model.data_preprocessor.size = crop_size
model.decode_head.num_classes = len(classes)
model.auxiliary_head.num_classes = len(classes)

# ADE20KDataset fixes ADE's 150 classes; the generic dataset reads the same
# layout (label 0 void) with ours
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
dataset = dict(
    type='BaseSegDataset',
    data_root=data_root,
    metainfo=dict(classes=classes),
    data_prefix=dict(img_path='images/training',
                     seg_map_path='annotations/training'),
    img_suffix='.png',
    seg_map_suffix='.png',
    reduce_zero_label=True)
# batch 2: UperNet's pooling branch has BatchNorm over 1x1 maps
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(dataset, pipeline=train_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        dataset,
        data_prefix=dict(img_path='images/validation',
                         seg_map_path='annotations/validation'),
        pipeline=test_pipeline))
test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
val_dataloader = val_evaluator = val_cfg = None  # tested by tools/test.py

train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
default_hooks.checkpoint = dict(type='CheckpointHook', by_epoch=False,
                                interval=2, max_keep_ckpts=1)
default_hooks.logger.interval = 1
log_processor = dict(by_epoch=False)
custom_hooks = [dict(type=SafeCheckpointLoadingHook)]
