# UperNet Swin V2-T on ADE20K: the Swin paper's recipe (Table 3, 512x512
# crops, 160K iterations, batch 16; configs/swin) with the V2 backbone. The
# Swin V2 paper reports no ADE20K result for T/S/B (configs/swin_v2/
# README.md). Pre-trained on ImageNet-1K at 256 with window 16 (the authors'
# v2.0.0 release), run at window 16 on every stage as in the detectors.
_base_ = '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/swinv2_tiny_patch4_window16_256.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.SwinTransformerV2',
        arch='tiny',
        img_size=256,
        window_size=16,
        pretrained_window_sizes=(16, 16, 16, 8),
        drop_path_rate=0.3,
        out_indices=(0, 1, 2, 3),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
# The V1 recipe's no-decay keys (V2 has no relative position table), and
# the position MLP and logit scales, the authors' V2 code's
# no_weight_decay_keywords.
optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True,
        custom_keys={
            'absolute_pos_embed': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.),
            'cpb_mlp': dict(decay_mult=0.),
            'logit_scale': dict(decay_mult=0.)
        }))
