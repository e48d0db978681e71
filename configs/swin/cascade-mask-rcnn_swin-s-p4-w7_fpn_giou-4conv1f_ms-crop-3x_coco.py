# Swin paper, Table 2(b): Cascade Mask R-CNN, Swin-S (ImageNet-1K), 3x
# schedule, multi-scale + crop, batch 16. Paper: 51.8 box AP / 44.7 mask AP
# (the official Swin-Transformer-Object-Detection release: 51.9 / 45.0).
# Swin-S: depths (2, 2, 18, 2), Swin-T's widths; drop path 0.2 as in the
# official config. Differs: fp32 (the official run used apex fp16).
_base_ = './cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
