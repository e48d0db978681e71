# Cascade Mask R-CNN with Swin-T, as in the Swin paper's COCO experiments
# (official Swin-Transformer-Object-Detection: 4conv1fc box heads, SyncBN,
# GIoU loss on decoded boxes, class-specific regression).
_base_ = [
    'mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
    './swin-t_backbone.py'
]

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

# SyncBN becomes plain BN in a single process (mmengine reverts it when the
# model is not distributed), so this config also runs on one CPU.
head_norm_cfg = dict(type='SyncBN', requires_grad=True)


def _bbox_head(target_stds):
    return dict(
        type='ConvFCBBoxHead',
        num_shared_convs=4,
        num_shared_fcs=1,
        in_channels=256,
        conv_out_channels=256,
        fc_out_channels=1024,
        roi_feat_size=7,
        num_classes=80,
        bbox_coder=dict(
            type='DeltaXYWHBBoxCoder',
            target_means=[0., 0., 0., 0.],
            target_stds=target_stds),
        reg_class_agnostic=False,
        reg_decoded_bbox=True,
        norm_cfg=head_norm_cfg,
        loss_cls=dict(
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
        loss_bbox=dict(type='GIoULoss', loss_weight=10.0))


model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True),
    neck=dict(in_channels=_base_.swin_t_channels),
    roi_head=dict(bbox_head=[
        _bbox_head([0.1, 0.1, 0.2, 0.2]),
        _bbox_head([0.05, 0.05, 0.1, 0.1]),
        _bbox_head([0.033, 0.033, 0.067, 0.067]),
    ]))
