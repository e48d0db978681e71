# UperNet Swin V2-S, 512x512: V2-T's config with the window-16 / 256 V2-S
# release (drop path 0.3, as configs/swin's Swin-S).
_base_ = './upernet_swinv2-t-w16_8xb2-160k_ade20k-512x512.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/swinv2_small_patch4_window16_256.pth'  # noqa
model = dict(
    backbone=dict(
        arch='small',
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
