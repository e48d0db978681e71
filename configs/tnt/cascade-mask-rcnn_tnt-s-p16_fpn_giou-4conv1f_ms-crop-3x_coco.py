# Cascade Mask R-CNN + FPN with TNT-S (official ImageNet-1K weights, 81.5%)
# on the Swin-T 3x COCO recipe (multi-scale + DETR-style crop, AdamW lr 1e-4
# wd 0.05, batch 16, 36 epochs), the backbone swapped for TNT's simple
# feature pyramid (strides 4/8/16/32 from the last block, 96/192/384/384
# channels), and TNT's optimizer rules (layer decay 0.7, no decay on
# norms/positions/class token). No published result: TNT was released as a
# classifier only.
_base_ = '../swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'  # noqa

pretrained = 'https://github.com/huawei-noah/Efficient-AI-Backbones/releases/download/tnt/tnt_s_81.5.pth.tar'  # noqa
model = dict(
    # the TNT weights were trained on (x - 127.5) / 127.5 (the release's
    # default_cfg: mean = std = 0.5), not on ImageNet's mean/std
    data_preprocessor=dict(mean=[127.5, 127.5, 127.5],
                           std=[127.5, 127.5, 127.5]),
    backbone=dict(
        _delete_=True,
        type='mmvisattn.TNT',
        arch='small',
        legacy=False,
        drop_path_rate=0.1,
        pyramid='simple',
        out_indices=(0, 1, 2, 3),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 384]))

# TNT's optimizer rules (plain 12-block backbone): layer-wise lr decay as
# ViTDet fine-tunes ViT-B (rate 0.7: block i of 12 at lr * 0.7 ** (12 - i),
# embeddings at lr * 0.7 ** 13, pyramid/neck/heads at lr); no weight decay
# on norms, position embeddings and the class token. The optimizer (type,
# lr, weight decay) is the recipe's.
optim_wrapper = dict(
    constructor='mmvisattn.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        _delete_=True,
        num_layers=12,
        layer_decay_rate=0.7,
        no_decay_names=('sentence_pos', 'word_pos', 'cls_token')))
