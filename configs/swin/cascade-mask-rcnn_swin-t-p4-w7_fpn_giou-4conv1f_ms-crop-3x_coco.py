# Swin paper, Table 2(a)/(b): Cascade Mask R-CNN, Swin-T (ImageNet-1K), 3x
# schedule, multi-scale + crop, batch 16. Paper: 50.5 box AP / 43.7 mask AP
# (the official Swin-Transformer-Object-Detection release: 50.4 / 43.7).
# Differs: fp32 (the official run used apex fp16; --amp on a GPU).
_base_ = [
    '../_base_/models/cascade-mask-rcnn_swin-t_fpn_giou-4conv1f.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/adamw_3x.py',
]

# ImageNet-1K Swin-T from the official release; a local path works too.
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
