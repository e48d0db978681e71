# The demo: the paper's Cascade Mask R-CNN Swin-T trained from scratch on the
# project's own generated shapes (tools/make_demo_data.py), sized to train and
# evaluate in about 15 minutes on 2 CPU cores. Architecture, heads, losses and
# optimizer (AdamW, wd 0.05, no decay on position tables and norms) are the
# paper's; the data, image size, proposal/sample counts and the schedule are
# scaled down, and for 200 iterations from scratch the lr is 4e-4 (paper:
# 1e-4) with gradient clipping at norm 10 (paper: none) and drop path 0.1
# (paper: 0.2). For real work start from ImageNet weights:
#   --cfg-options model.backbone.init_cfg.type=Pretrained \
#                 model.backbone.init_cfg.checkpoint=swin_tiny_patch4_window7_224.pth
_base_ = '../swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'

data_root = 'data/shapes/'
metainfo = dict(
    classes=('square', 'circle', 'triangle'),
    palette=[(40, 200, 40), (220, 40, 40), (30, 140, 220)])
num_classes = len(metainfo['classes'])
image_size = (160, 160)
max_iters = 200

model = dict(
    backbone=dict(init_cfg=None, drop_path_rate=0.1),
    # Fewer proposals and RoI samples: the RoI heads dominate a CPU step.
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=1000, max_per_img=256),
        rcnn=[
            dict(stage, sampler=dict(stage['sampler'], num=32))
            for stage in _base_.model.train_cfg.rcnn
        ]),
    test_cfg=dict(
        rpn=dict(nms_pre=500, max_per_img=100),
        rcnn=dict(max_per_img=20)),
    roi_head=dict(
        # lists replace rather than merge: rebuild the paper's heads
        bbox_head=[
            dict(head, num_classes=num_classes)
            for head in _base_.model.roi_head.bbox_head
        ],
        mask_head=dict(num_classes=num_classes)))

backend_args = None
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='PackDetInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=None,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_train.json',
        data_prefix=dict(img='images/train/'),
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
test_evaluator = dict(ann_file=data_root + 'annotations/instances_val.json')
# Evaluation is tools/test.py's job: no validation inside the training run.
val_dataloader = None
val_evaluator = None
val_cfg = None

train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
         end=30),
    dict(
        type='MultiStepLR',
        by_epoch=False,
        begin=0,
        end=max_iters,
        milestones=[int(max_iters * 0.85)],
        gamma=0.1)
]
# fused=True: torch's single-kernel AdamW, the same update as the loop over
# parameters; on 2 CPU threads its step over the model's 84M parameters
# takes about a quarter of the loop's (docs/benchmarks.md, "The whole demo
# detector"), and the loop is fp32 with or without --amp.
optim_wrapper = dict(
    optimizer=dict(lr=4e-4, fused=True), clip_grad=dict(max_norm=10.))
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(by_epoch=False, interval=max_iters, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
