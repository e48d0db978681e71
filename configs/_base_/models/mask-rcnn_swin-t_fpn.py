# Mask R-CNN with Swin-T, as in the Swin authors' Mask R-CNN release
# (Swin-Transformer-Object-Detection, configs/_base_/models/
# mask_rcnn_swin_fpn.py): mmdet's Mask R-CNN R-50-FPN heads unchanged
# (Shared2FC box head, L1 losses, 4-conv mask head), Swin-T in ResNet's place.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    './swin-t_backbone.py'
]

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True),
    neck=dict(in_channels=_base_.swin_t_channels))
