# Mask R-CNN, Swin-S (ImageNet-1K), 3x schedule, multi-scale + crop, batch
# 16, drop path 0.2. The authors' release (Swin-Transformer-Object-Detection,
# configs/swin/mask_rcnn_swin_small_patch4_window7_mstrain_480-800_adamw_3x_
# coco.py): 48.5 box AP / 43.3 mask AP. Differs: fp32 (apex fp16 there).
_base_ = './mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
