# Swin paper, Table 2(b): Cascade Mask R-CNN, Swin-B (ImageNet-1K, 224,
# window 7), 3x schedule, multi-scale + crop, batch 16. Paper: 51.9 box AP /
# 45.0 mask AP (the official release: the same). Swin-B: C = 128, heads
# (4, 8, 16, 32), depths (2, 2, 18, 2); drop path 0.3 as in the official
# config. Differs: fp32 (the official run used apex fp16).
_base_ = './cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_base_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[128, 256, 512, 1024]))
