# Swin paper, Table 2(a): Sparse R-CNN with Swin-T (ImageNet-1K), 300
# proposals, multi-scale training (480..800, <= 1333), AdamW lr 1e-4
# wd 0.05, batch 16, 3x. Paper: 47.9 box AP. The R-50 config with the
# backbone swapped (FPN in_channels [96, 192, 384, 768], mmdet's Sparse
# R-CNN neck otherwise); drop path 0.2 as for Swin-T at 3x. The official
# repository publishes no Sparse R-CNN config.
_base_ = ['./sparse-rcnn_r50_fpn_300-proposals_ms-3x_coco.py', '../_base_/models/swin-t_backbone.py']

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True),
    neck=dict(in_channels=_base_.swin_t_channels))
