# Swin paper (arXiv 2103.14030v2), Table 4, "abs. pos.": ViT's absolute
# position embedding instead of the relative bias. Swin-T, Cascade Mask R-CNN
# 3x on COCO (Sec. 4.4), the main config with one backbone switch. Paper:
# 49.0 box AP / 42.4 mask AP.
# The backbone starts from the ImageNet-1K model of the same ablation: train
# configs/swin/ablations/swin-t-p4-w7-abspos_16xb64_300e_in1k.py first (its
# last checkpoint is read from its default work_dir below; change
# `pretrained` if yours is elsewhere).
_base_ = '../cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'

pretrained = 'work_dirs/swin-t-p4-w7-abspos_16xb64_300e_in1k/epoch_300.pth'
model = dict(
    backbone=dict(
        use_abs_pos_embed=True,
        attn_cfg=dict(type='WindowAttention', relative_position=False),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
