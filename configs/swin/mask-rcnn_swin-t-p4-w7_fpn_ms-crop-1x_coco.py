# Mask R-CNN, Swin-T (ImageNet-1K), 1x schedule (12 epochs, lr x0.1 at 8 and
# 11), multi-scale + crop, batch 16, AdamW lr 1e-4 wd 0.05. Not in the paper
# (its Table 2 has Cascade Mask R-CNN); the authors' release
# (Swin-Transformer-Object-Detection, configs/swin/mask_rcnn_swin_tiny_
# patch4_window7_mstrain_480-800_adamw_1x_coco.py) reports 43.7 box AP /
# 39.8 mask AP, and its checkpoint evaluates with this config unchanged.
# Drop path 0.1 as in that config. Differs: fp32 (the release used apex
# fp16; --amp on a GPU).
_base_ = [
    '../_base_/models/mask-rcnn_swin-t_fpn.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/adamw_1x.py',
]

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
