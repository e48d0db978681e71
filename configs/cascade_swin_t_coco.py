# Short name for the paper's Cascade Mask R-CNN Swin-T 3x COCO config.
_base_ = './swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'
