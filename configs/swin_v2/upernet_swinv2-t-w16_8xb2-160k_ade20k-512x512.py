# UperNet Swin V2-T on ADE20K: the Swin paper's recipe (Table 3, 512x512
# crops, 160K iterations, batch 16; configs/swin) with the V2 backbone from
# the window-16 / 256 release (../_base_/models/swinv2-t-w16_backbone.py),
# drop path 0.3 as the V1 segmentation configs. The Swin V2 paper reports no
# ADE20K result for T/S/B (configs/swin_v2/README.md).
_base_ = [
    '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py',
    '../_base_/models/swinv2-t-w16_backbone.py'
]

model = dict(
    backbone=dict(_base_.swinv2_t_backbone, _delete_=True,
                  drop_path_rate=0.3))
optim_wrapper = dict(paramwise_cfg=_base_.swinv2_paramwise_cfg)
