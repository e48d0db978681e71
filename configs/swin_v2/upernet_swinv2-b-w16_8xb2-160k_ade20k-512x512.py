# UperNet Swin V2-B, 512x512: V2-T's config with Swin-B's widths and the
# window-16 / 256 V2-B release (drop path 0.3, as configs/swin's Swin-B).
_base_ = './upernet_swinv2-t-w16_8xb2-160k_ade20k-512x512.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/swinv2_base_patch4_window16_256.pth'  # noqa
model = dict(
    backbone=dict(
        arch='base',
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[128, 256, 512, 1024]),
    auxiliary_head=dict(in_channels=512))
