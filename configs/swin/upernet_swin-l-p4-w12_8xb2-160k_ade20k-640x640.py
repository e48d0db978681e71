# Swin paper, Table 3: UperNet Swin-L‡ -- ImageNet-22K weights (384px,
# window 12), 640x640 crops, 160K iterations, batch 16. Paper: 53.5 mIoU
# (multi-scale; 62.8 test score), 234M / 3230G. We count 234.0M but
# 2581.5G at 640x2560 (README: no setting reproduces 3230G).
_base_ = './upernet_swin-b-p4-w7_8xb2-160k_ade20k-640x640.py'
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_large_patch4_window12_384_22k.pth'  # noqa
model = dict(
    backbone=dict(
        arch='large',
        window_size=12,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[192, 384, 768, 1536]),
    auxiliary_head=dict(in_channels=768))
