# RSWAttViT on CIFAR-10: the RSWAtt source's classification example, field
# for field as the source describes it (model and recipe): a plain ViT at
# ViT-B/16 width (d 768, 12 heads, patch 16, class token) with 6 RSWAtt
# layers (window scales 4, 8, 16 fused by a sigmoid weight per scale,
# concatenation and a linear layer; the offset predictor; the learnable
# pixel position encoding initialised from sinusoids); CIFAR-10 resized to
# 224x224, ImageNet mean/std, no augmentation; batch 32, AdamW lr 1e-4,
# weight decay 0.01, 10 epochs, constant learning rate. One process:
#   python tools/train.py configs/rswatt/rswatt-vit-b6-p16_1xb32-10e_cifar10-224px.py
# mmpretrain's CIFAR10 dataset reads the python pickle batches from
# data/cifar10/cifar-10-batches-py (download=True fetches them once).
_base_ = [
    'mmpretrain::_base_/datasets/cifar10_bs16.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmvisattn.RSWAttViT',
        arch='base-6',
        img_size=224,
        patch_size=16,
        scale_windows=(4, 8, 16),
        attn_cfg=dict(
            fusion=dict(type='ConcatFusion'),
            window_predictor=dict(type='OffsetExtents')),
        pixel_pos_embed=True,
        out_type='cls_token'),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=10,
        in_channels=768,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0),
        topk=(1, )))

# ImageNet mean/std on the RGB images the CIFAR batches hold
data_preprocessor = dict(
    num_classes=10,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=False)
train_pipeline = [
    dict(type='Resize', scale=224),
    dict(type='PackInputs'),
]
test_pipeline = train_pipeline
train_dataloader = dict(batch_size=32, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=32, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.01))
param_scheduler = []  # constant learning rate
train_cfg = dict(by_epoch=True, max_epochs=10, val_interval=1)
val_cfg = dict()
test_cfg = dict()
# the batch the learning rate is given for (1 GPU x 32)
auto_scale_lr = dict(base_batch_size=32)
