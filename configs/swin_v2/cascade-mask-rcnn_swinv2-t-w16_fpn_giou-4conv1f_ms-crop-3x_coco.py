# Cascade Mask R-CNN with Swin V2-T: the Swin paper's COCO recipe (Table 2,
# 3x schedule, multi-scale + crop, batch 16; configs/swin) with the V2
# backbone from the window-16 / 256 release (../_base_/models/
# swinv2-t-w16_backbone.py). The Swin V2 paper reports no COCO result for
# T/S/B (configs/swin_v2/README.md).
_base_ = [
    '../swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
    '../_base_/models/swinv2-t-w16_backbone.py'
]

model = dict(backbone=dict(_base_.swinv2_t_backbone, _delete_=True))
optim_wrapper = dict(paramwise_cfg=_base_.swinv2_paramwise_cfg)
