# The fine-tuning recipe at 384x384 (window 12 in the configs using it):
# the 224 augmentation with 384 crops; evaluation resizes to 384 (as
# mmpretrain's 384 configs, which reproduce the released 384 models).
_base_ = './swin_finetune_in1k_30e.py'

train_pipeline = [
    dict(step, scale=384) if step['type'] == 'RandomResizedCrop' else step
    for step in _base_.train_pipeline
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=384, backend='pillow', interpolation='bicubic'),
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
