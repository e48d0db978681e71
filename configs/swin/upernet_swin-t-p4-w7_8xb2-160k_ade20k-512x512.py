# Swin paper, Table 3: UperNet Swin-T on ADE20K, ImageNet-1K weights, 512x512
# crops, 160K iterations, batch 16. Paper: 60M / 945G (FLOPs at 512x2048);
# the official release: 44.51 mIoU single-scale, 45.81 multi-scale + flip.
# Data: mmseg's ADE20K pipeline (resize to 2048x512 with ratio 0.5..2.0,
# random crop 512 with cat_max_ratio 0.75, flip, photometric distortion;
# test at 2048x512, `tools/test.py --tta`: ratios 0.5..1.75 + flip).
_base_ = [
    '../_base_/models/upernet_swin-t.py', 'mmseg::_base_/datasets/ade20k.py',
    '../_base_/schedules/adamw_poly_160k_ade20k.py'
]
crop_size = (512, 512)
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
