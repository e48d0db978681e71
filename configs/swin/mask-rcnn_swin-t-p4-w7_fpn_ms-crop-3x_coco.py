# Mask R-CNN, Swin-T (ImageNet-1K), 3x schedule (36 epochs, lr x0.1 at 27 and
# 33), multi-scale + crop, batch 16, AdamW lr 1e-4 wd 0.05, drop path 0.2.
# The authors' release (Swin-Transformer-Object-Detection, configs/swin/
# mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_adamw_3x_coco.py):
# 46.0 box AP / 41.6 mask AP. Differs: fp32 (the release used apex fp16).
_base_ = [
    '../_base_/models/mask-rcnn_swin-t_fpn.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/adamw_3x.py',
]

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
