# TNT-S on ImageNet-1K as the TNT paper trains it (section 4.1, Table 2:
# DeiT's recipe): 300 epochs, AdamW lr 1e-3 at batch 1024 (5e-4 x bs/512),
# weight decay 0.05, cosine decay after 5 warm-up epochs, label smoothing
# 0.1, stochastic depth 0.1, RandAugment (9, 0.5), Mixup 0.8, CutMix 1.0,
# random erasing 0.25, repeated augmentation; mean/std 0.5 (TNT's
# normalisation). 23.8M, 5.2G, 81.5 top-1 in the paper.
_base_ = '../_base_/classification/swin_in1k_300e.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.TNT',
        arch='small',
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
        custom_keys={'.cls_token': dict(decay_mult=0.0),
                     'pos_embed': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5)
]
