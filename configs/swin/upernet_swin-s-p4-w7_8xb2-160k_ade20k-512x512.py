# Swin paper, Table 3: UperNet Swin-S, ImageNet-1K weights, 512x512.
# Paper: 81M / 1038G; official release: 47.64 / 49.47 (ms + flip) mIoU.
_base_ = './upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
