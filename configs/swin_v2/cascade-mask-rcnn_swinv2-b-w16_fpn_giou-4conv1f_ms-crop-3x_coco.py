# Cascade Mask R-CNN Swin V2-B, 3x: V2-T's config with Swin-B's drop path
# (0.3, configs/swin's Swin-B 3x), its widths and the window-16 / 256 V2-B
# release.
_base_ = './cascade-mask-rcnn_swinv2-t-w16_fpn_giou-4conv1f_ms-crop-3x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/swinv2_base_patch4_window16_256.pth'  # noqa
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[128, 256, 512, 1024]))
