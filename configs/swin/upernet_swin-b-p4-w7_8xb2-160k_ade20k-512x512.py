# UperNet Swin-B, ImageNet-1K weights, 512x512 (the official release's
# Swin-B row: 121M / 1188G, 48.13 / 49.72 (ms + flip) mIoU; Table 3 lists
# the 22K / 640x640 model instead, see the -640x640 config).
_base_ = './upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_base_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[128, 256, 512, 1024]),
    auxiliary_head=dict(in_channels=512))
