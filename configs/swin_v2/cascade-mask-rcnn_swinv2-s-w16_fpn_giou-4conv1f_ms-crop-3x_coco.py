# Cascade Mask R-CNN Swin V2-S, 3x: V2-T's config with Swin-S's drop path
# (0.2, configs/swin's Swin-S 3x) and the window-16 / 256 V2-S release.
_base_ = './cascade-mask-rcnn_swinv2-t-w16_fpn_giou-4conv1f_ms-crop-3x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/swinv2_small_patch4_window16_256.pth'  # noqa
model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
