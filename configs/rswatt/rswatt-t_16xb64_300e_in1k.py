# RSWAtt-T on ImageNet-1K with the Swin-T recipe (300 epochs, AdamW 1e-3 at
# batch 1024, wd 0.05, cosine + 20 warm-up epochs, DeiT augmentation,
# stochastic depth 0.2): the pre-training its detection and segmentation
# configs need, since no ImageNet weights exist for it anywhere.
_base_ = '../_base_/classification/swin_in1k_300e.py'
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.RSWAttTransformer',
        arch='tiny',
        out_indices=(3, ),
        drop_path_rate=0.2),
    head=dict(in_channels=768))
