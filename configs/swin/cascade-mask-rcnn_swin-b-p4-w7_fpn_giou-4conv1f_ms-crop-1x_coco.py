# Cascade Mask R-CNN, Swin-B (ImageNet-1K, 224, window 7), 1x schedule
# (12 epochs), multi-scale + crop, batch 16. Neither the paper nor the
# official repository reports this setting (no published number); drop path
# 0.3 as in the official 3x Swin-B config.
_base_ = './cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_base_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[128, 256, 512, 1024]))
