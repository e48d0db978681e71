# Swin paper, Table 2(a): ATSS with Swin-T (ImageNet-1K), multi-scale
# training (480..800, <= 1333), AdamW lr 1e-4 wd 0.05, batch 16, 3x.
# Paper: 47.2 box AP. The R-50 config with the backbone swapped: FPN keeps
# mmdet's ATSS settings (start_level=1, extra convs on output, P3-P7), only
# its in_channels change; drop path 0.2 as for Swin-T at 3x. The official
# repository publishes no ATSS config.
_base_ = ['./atss_r50_fpn_ms-3x_coco.py', '../_base_/models/swin-t_backbone.py']

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True),
    neck=dict(in_channels=_base_.swin_t_channels))
