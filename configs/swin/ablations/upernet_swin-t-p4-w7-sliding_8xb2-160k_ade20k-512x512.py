# Swin paper (arXiv 2103.14030v2), Table 6, "sliding window": each token
# attends to the 7x7 window centred on it (halo-tiled kernel;
# type='SlidingWindowAttention' is the naive unfold of Table 5, same result). Swin-T,
# UperNet 160K on ADE20K (Sec. 4.4), the main config with one backbone
# switch. Paper: 45.8 mIoU.
# The backbone starts from the ImageNet-1K model of the same ablation: train
# configs/swin/ablations/swin-t-p4-w7-sliding_16xb64_300e_in1k.py first (its
# last checkpoint is read from its default work_dir below; change
# `pretrained` if yours is elsewhere).
_base_ = '../upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'

pretrained = 'work_dirs/swin-t-p4-w7-sliding_16xb64_300e_in1k/epoch_300.pth'
model = dict(
    backbone=dict(
        attn_cfg=dict(type='HaloSlidingWindowAttention'),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
