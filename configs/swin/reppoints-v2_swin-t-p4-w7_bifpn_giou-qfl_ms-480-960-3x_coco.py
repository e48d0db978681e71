# Swin paper, Table 2(a): RepPoints v2 with Swin-T (50.0 box AP, 45M, 283G):
# the Swin authors' release
# (Swin-Transformer-Object-Detection: configs/swin/
# reppoitsv2_swin_tiny_patch4_window7_mstrain_480_960_giou_gfocal_bifpn_adamw_3x_coco.py),
# the R-50 config with Swin-T (drop path 0.2, stages 2-4 into the BiFPN).
_base_ = [
    './reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py',
    '../_base_/models/swin-t_backbone.py'
]

model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True, out_indices=(1, 2, 3)),
    neck=dict(in_channels=_base_.swin_t_channels[1:]))
