# The RSWAtt benchmark, detection: RetinaNet (the source's detection head)
# on the RSWAtt 'nano' backbone (64 channels, depths 2/2/2/2, largest
# windows 5 and 9, gate fusion), trained from scratch on the COCO half of the
# harder generated set (dev/make_rswatt_bench.py writes
# data/rswatt_bench/): five classes told apart by shape only, sizes 5-96 px,
# clutter and occlusion, 128x128 images. Sized for a CPU: FPN and head at 64
# channels from stride 4 (P2-P6, so 5 px objects have a level), two stacked
# convs, anchors 8 px at P2. The variants of the ablation
# (dev/rswatt_ablation.py --task det) override
# model.backbone only.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

data_root = 'data/rswatt_bench/'
metainfo = dict(
    classes=('square', 'disc', 'triangle', 'ring', 'bar'),
    palette=[(40, 200, 40), (220, 40, 40), (30, 140, 220), (200, 200, 200),
             (220, 200, 30)])
num_classes = len(metainfo['classes'])
image_size = (128, 128)
max_iters = 200

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.RSWAttTransformer',
        arch='nano',
        scale_windows=(5, 9),
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3)),
    neck=dict(
        in_channels=[64, 128, 256, 512],
        out_channels=64,
        start_level=0,
        add_extra_convs='on_input',
        num_outs=5),
    bbox_head=dict(
        num_classes=num_classes,
        in_channels=64,
        feat_channels=64,
        stacked_convs=2,
        anchor_generator=dict(octave_base_scale=2,
                              strides=[4, 8, 16, 32, 64])),
    test_cfg=dict(nms_pre=500, max_per_img=50))

backend_args = None
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='PackDetInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=None,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_train.json',
        data_prefix=dict(img='images/train/'),
        filter_cfg=dict(filter_empty_gt=True, min_size=0),
        pipeline=train_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_val.json',
        data_prefix=dict(img='images/val/'),
        pipeline=test_pipeline))
test_evaluator = dict(ann_file=data_root + 'annotations/instances_val.json',
                      metric='bbox')
# Evaluation is tools/test.py's job: no validation inside the training run.
val_dataloader = None
val_evaluator = None
val_cfg = None
test_cfg = dict(type='TestLoop')

train_cfg = dict(type='IterBasedTrainLoop',
                 max_iters=max_iters)
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999),
                   weight_decay=0.05),
    clip_grad=dict(max_norm=10.),
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
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(by_epoch=False, interval=max_iters, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
