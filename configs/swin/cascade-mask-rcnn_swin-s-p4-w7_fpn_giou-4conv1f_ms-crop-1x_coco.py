# Cascade Mask R-CNN, Swin-S (ImageNet-1K), 1x schedule (12 epochs), multi-
# scale + crop, batch 16. Neither the paper nor the official repository
# reports this setting (no published number); drop path 0.2 as in the
# official 3x Swin-S config.
_base_ = './cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
