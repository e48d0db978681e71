# Swin paper, Table 2(a): RepPoints v2 with Swin-T (ImageNet-1K), the R-50
# config with the backbone swapped (same recipe: multi-scale 480..800,
# AdamW lr 1e-4 wd 0.05, batch 16, 3x). Paper: 50.0 box AP, 45M, 283G.
# FPN keeps RepPoints' settings (start_level=1, extra convs on the input,
# P3-P7), only its in_channels change; drop path 0.2 as for Swin-T at 3x.
_base_ = ['./reppoints-v2_r50_fpn_giou_ms-3x_coco.py', '../_base_/models/swin-t_backbone.py']

model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True),
    neck=dict(in_channels=_base_.swin_t_channels))
