# Swin paper (arXiv 2103.14030v2), Table 6, "sliding window": each token
# attends to the 7x7 window centred on it (halo-tiled kernel;
# type='SlidingWindowAttention' is the naive unfold of Table 5, same result). Swin-T,
# ImageNet-1K, 300 epochs (Sec. 4.4), the main config with one backbone
# switch. Paper: 81.4 top-1 / 95.6 top-5.
_base_ = '../swin-t-p4-w7_16xb64_300e_in1k.py'

model = dict(
    backbone=dict(
        attn_cfg=dict(type='HaloSlidingWindowAttention')))
