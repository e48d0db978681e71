# UperNet with TNT-S (official ImageNet-1K weights) on the Swin-T ADE20K
# recipe (512x512 crops, AdamW lr 6e-5 wd 0.01, poly with 1500 warmup
# iterations, 160K iterations, batch 16), TNT's simple feature pyramid and
# optimizer rules (layer decay 0.7, no decay on norms/positions/class token).
# No published result.
_base_ = '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'  # noqa

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
    decode_head=dict(in_channels=[96, 192, 384, 384]),
    auxiliary_head=dict(in_channels=384))

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
