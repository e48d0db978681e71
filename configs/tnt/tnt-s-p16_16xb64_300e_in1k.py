# TNT-S on ImageNet-1K as the TNT paper trains it (section 4.1, Table 2:
# DeiT's recipe): 300 epochs, AdamW lr 1e-3 at batch 1024 (5e-4 x bs/512),
# weight decay 0.05, cosine decay after 5 warm-up epochs, label smoothing
# 0.1, stochastic depth 0.1, RandAugment (9, 0.5), Mixup 0.8, CutMix 1.0,
# random erasing 0.25, repeated augmentation; mean/std 0.5 (TNT's
# normalisation); EMA of the weights; test crop 0.9 bicubic. Source: the
# release's command (huawei-noah/Efficient-AI-Backbones tnt_pytorch/readme.md)
# and model (tnt_pytorch/tnt.py: default_cfg, no_weight_decay). 23.8M, 5.2G,
# 81.5 top-1 in the paper. Differs: fp32 (the release used --amp).
_base_ = '../_base_/classification/swin_in1k_300e.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.TNT',
        arch='small',
        legacy=False,  # the official release's layout
        out_type='cls_token',
        drop_path_rate=0.1),
    neck=None,
    head=dict(in_channels=384))
data_preprocessor = dict(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5])
train_dataloader = dict(sampler=dict(_delete_=True, type='RepeatAugSampler',
                                     shuffle=True))
optim_wrapper = dict(
    clip_grad=None,  # DeiT/TNT train without clipping
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        # timm's param_groups_weight_decay (the release trained with timm's
        # train.py): no decay for 1-D tensors, biases and no_weight_decay()
        # = {outer_pos, inner_pos, cls_token}, ours sentence_pos / word_pos
        custom_keys={'.cls_token': dict(decay_mult=0.0),
                     '.sentence_pos': dict(decay_mult=0.0),
                     '.word_pos': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5)
]
# The release's evaluation (its default_cfg): bicubic resize of the short
# side to 248 = floor(224 / 0.9), centre crop 224.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=248, edge='short', backend='pillow',
         interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
# The release trained with --model-ema --model-ema-decay 0.99996 (tnt_pytorch
# readme): mmengine's EMA with momentum 1 - 0.99996, evaluated with the
# averaged weights.
custom_hooks = [
    dict(type='mmvisattn.ReleaseClassifierHook'),
    dict(type='EMAHook', momentum=4e-5, priority='ABOVE_NORMAL'),
]
