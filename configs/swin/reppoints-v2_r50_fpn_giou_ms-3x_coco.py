# Swin paper, Table 2(a): RepPoints v2 with ResNet-50, trained with the
# paper's recipe for all four frameworks: multi-scale training (short side
# 480..800, long side <= 1333), AdamW lr 1e-4 wd 0.05, batch 16 (2 x 8 GPUs),
# 3x (36 epochs, lr x0.1 at 27 and 33). Paper: 46.5 box AP, 42M, 274G.
# Model: the authors' reppoints_v2_r50_fpn_giou (see the base); their
# gradient clipping (max norm 35) is kept, the only setting of theirs the
# Swin recipe does not replace.
_base_ = [
    '../_base_/models/reppoints-v2_r50_fpn_giou.py',
    'mmdet::_base_/datasets/coco_detection.py',
    '../_base_/schedules/adamw_3x.py'
]

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='RandomChoiceResize',
        scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333),
                (608, 1333), (640, 1333), (672, 1333), (704, 1333),
                (736, 1333), (768, 1333), (800, 1333)],
        keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
optim_wrapper = dict(clip_grad=dict(max_norm=35, norm_type=2))
