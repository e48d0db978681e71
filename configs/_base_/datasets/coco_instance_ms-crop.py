# COCO instances with the Swin paper's augmentation: multi-scale training
# (short side 480..800, long side <= 1333) or, with probability 1/2, the
# DETR-style branch (resize to 400/500/600, random crop 384..600, resize).
_base_ = 'mmdet::_base_/datasets/coco_instance.py'

ms_scales = [(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333),
             (640, 1333), (672, 1333), (704, 1333), (736, 1333), (768, 1333),
             (800, 1333)]
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(
        type='RandomChoice',
        transforms=[
            [dict(type='RandomChoiceResize', scales=ms_scales,
                  keep_ratio=True)],
            [
                dict(
                    type='RandomChoiceResize',
                    scales=[(400, 1333), (500, 1333), (600, 1333)],
                    keep_ratio=True),
                dict(
                    type='RandomCrop',
                    crop_type='absolute_range',
                    crop_size=(384, 600),
                    allow_negative_crop=True),
                dict(
                    type='RandomChoiceResize', scales=ms_scales,
                    keep_ratio=True)
            ],
        ]),
    dict(type='PackDetInputs')
]
# 2 images per GPU x 8 GPUs = the paper's batch of 16.
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
