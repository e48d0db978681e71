# Swin paper, Table 2(a)/(b): the ResNet-50 baseline of Cascade Mask R-CNN,
# trained with Swin-T's recipe (same 4conv1fc GIoU heads, multi-scale + crop,
# AdamW lr 1e-4 wd 0.05, batch 16, 3x). Paper: 46.3 box AP / 40.1 mask AP.
# Only the backbone differs from the Swin-T config: mmdet's ResNet-50
# (torchvision ImageNet-1K weights, stage 1 frozen, BN frozen), FPN on
# [256, 512, 1024, 2048]. The paper does not publish this config; the
# optimizer's no-decay keys (position tables, norms) match nothing in
# ResNet-50 or these heads, so they change nothing here.
_base_ = [
    '../_base_/models/cascade-mask-rcnn_swin-t_fpn_giou-4conv1f.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/adamw_3x.py',
]

model = dict(
    backbone=dict(
        _delete_=True,
        type='ResNet',
        depth=50,
        num_stages=4,
        out_indices=(0, 1, 2, 3),
        frozen_stages=1,
        norm_cfg=dict(type='BN', requires_grad=True),
        norm_eval=True,
        style='pytorch',
        init_cfg=dict(type='Pretrained', checkpoint='torchvision://resnet50')),
    neck=dict(in_channels=[256, 512, 1024, 2048]))
