# UperNet Swin-T (mmseg) on the ADE20K-layout copy of the generated shapes
# (tools/make_demo_data.py writes data/shapes/ade/): a small semantic
# segmentation run for CPUs, and the mmseg path through tools/train.py and
# tools/test.py. Label 0 is void (reduce_zero_label), 1..3 the shapes.
_base_ = [
    'mmseg::_base_/models/upernet_swin.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_20k.py',
]
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

data_root = 'data/shapes/ade/'
metainfo = dict(
    classes=('square', 'circle', 'triangle'),
    palette=[[40, 200, 40], [220, 40, 40], [30, 140, 220]])
crop_size = (128, 128)
max_iters = 200

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        _delete_=True,
        type='mmvisattn.SwinTransformer',
        arch='tiny',
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3)),
    decode_head=dict(num_classes=3, channels=128),
    auxiliary_head=dict(num_classes=3, channels=64))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs')
]
# ADE20KDataset fixes the 150 ADE classes; the generic dataset reads the same
# layout with our own classes.
dataset = dict(
    type='BaseSegDataset',
    data_root=data_root,
    metainfo=metainfo,
    img_suffix='.png',
    seg_map_suffix='.png',
    reduce_zero_label=True)
# batch >= 2: UperNet's pooling branch has BatchNorm over 1x1 maps
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(dataset, pipeline=train_pipeline))
test_dataloader = dict(
    num_workers=0,
    persistent_workers=False,
    dataset=dict(dataset, pipeline=test_pipeline))
val_dataloader = None
val_evaluator = None
val_cfg = None

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-4, betas=(0.9, 0.999),
                   weight_decay=0.01),
    paramwise_cfg=dict(
        custom_keys={
            'absolute_pos_embed': dict(decay_mult=0.),
            'relative_position_bias_table': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
         end=20),
    dict(type='PolyLR', power=1.0, begin=20, end=max_iters, eta_min=0.0,
         by_epoch=False)
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(by_epoch=False, interval=max_iters, max_keep_ckpts=1))
