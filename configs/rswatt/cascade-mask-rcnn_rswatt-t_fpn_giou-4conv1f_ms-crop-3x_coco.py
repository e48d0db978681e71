# Cascade Mask R-CNN + FPN with the RSWAtt backbone at Swin-T scale (96
# channels, depths 2/2/6/2; reconstructed sliding windows of largest size 5
# and 9, fused per pixel) on the Swin-T 3x COCO recipe. No ImageNet weights
# exist for it yet: pretrain it as a classifier first and pass the
# checkpoint as init_cfg=dict(type='Pretrained', checkpoint=...).
_base_ = '../swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'  # noqa

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.RSWAttTransformer',
        arch='tiny',
        scale_windows=(5, 9),
        drop_path_rate=0.2,
        out_indices=(0, 1, 2, 3),
        init_cfg=None),
    neck=dict(in_channels=[96, 192, 384, 768]))
