# Cascade Mask R-CNN R-50 (the Swin paper's R-50 baseline recipe) with the
# RSWAtt plug-in after conv2 (the 3x3 conv) of every bottleneck of stages
# 2-4 (c3-c5), on the bottleneck width (128/256/512 channels):
# largest windows 5 and 9, heads = channels / 32; each plug-in adds
# gamma * RSWAtt(LN(x)) with gamma starting at 0, so the torchvision weights
# start unchanged.
_base_ = '../swin/cascade-mask-rcnn_r50_fpn_giou-4conv1f_ms-crop-3x_coco.py'  # noqa

model = dict(
    backbone=dict(plugins=[
        dict(
            cfg=dict(type='mmvisattn.RSWAttPlugin', scale_windows=(5, 9)),
            stages=(False, True, True, True),
            position='after_conv2')
    ]))
