# Swin paper, Table 2(a): RepPoints v2 with ResNet-50 (46.5 box AP, 42M,
# 274G): the model of the Swin authors' RepPoints v2 release with its recipe
# (Swin-Transformer-Object-Detection: configs/_base_/models/
# reppointsv2_swin_bifpn.py, mmdet/models/necks/bifpn.py and configs/swin/
# reppoitsv2_swin_tiny_patch4_window7_mstrain_480_960_giou_gfocal_bifpn_adamw_3x_coco.py).
# It is the RepPoints v2 authors' FPN model below with:
# - neck: BiFPN over C3-C5 (256 channels, 2 repeats, GN, no activation after
#   its convs), P6/P7 max-pooled from C5;
# - classification: quality focal loss (beta 2) whose positive targets are
#   the IoU of the refined box with its ground truth;
# - point losses: GIoU with the legacy "+1" on boxes in units of 4 x stride;
# - training: short side 480..960 in steps of 32, no gradient clipping
#   (the rest of the Swin recipe as below: AdamW 1e-4, wd 0.05, 3x).
# They trained in fp16 (apex); add --amp on a GPU to do the same.
# The assigners are mmdet's: the authors' PointAssignerV2 is a vectorised
# PointAssigner, and their ATSSAssignerV2 differs from ATSSAssigner only on
# a level with fewer than topk=9 points, which no training image (short
# side >= 480) has (tests/test_reppoints_v2.py checks both).
_base_ = './reppoints-v2_r50_fpn_giou_ms-3x_coco.py'

norm_cfg = dict(type='GN', num_groups=32, requires_grad=True)
model = dict(
    backbone=dict(out_indices=(1, 2, 3)),
    neck=dict(
        _delete_=True,
        type='mmvisattn.BiFPN',
        in_channels=[512, 1024, 2048],
        out_channels=256,
        num_outs=5,
        num_repeat=2,
        norm_cfg=norm_cfg),
    bbox_head=dict(
        loss_cls=dict(
            _delete_=True,
            type='QualityFocalLoss',
            use_sigmoid=True,
            beta=2.0,
            loss_weight=1.0),
        loss_bbox_init=dict(
            _delete_=True, type='mmvisattn.LegacyGIoULoss', loss_weight=1.0),
        loss_bbox_refine=dict(
            _delete_=True, type='mmvisattn.LegacyGIoULoss', loss_weight=2.0)))

train_pipeline = [
    dict(t, scales=[(short, 1333) for short in range(480, 961, 32)])
    if t['type'] == 'RandomChoiceResize' else t
    for t in _base_.train_pipeline
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
optim_wrapper = dict(clip_grad=None)
