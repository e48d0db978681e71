# Cascade Mask R-CNN, Swin-T (ImageNet-1K), 1x schedule (12 epochs, lr x0.1
# at 8 and 11), multi-scale + crop, batch 16. Not in the paper (Table 2 is
# 3x only); the official Swin-Transformer-Object-Detection release reports
# 48.1 box AP / 41.7 mask AP for this setting. As in its config, drop path
# is 0.0 at 1x (0.2 at 3x). Differs: fp32 (the official run used apex fp16).
_base_ = [
    '../_base_/models/cascade-mask-rcnn_swin-t_fpn_giou-4conv1f.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/adamw_1x.py',
]

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        drop_path_rate=0.0,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
