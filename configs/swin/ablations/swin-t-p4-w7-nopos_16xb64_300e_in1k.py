# Swin paper (arXiv 2103.14030v2), Table 4, "no pos.": no position term at
# all. Swin-T, ImageNet-1K, 300 epochs (Sec. 4.4), the main config with one
# backbone switch. Paper: 80.1 top-1 / 94.9 top-5.
_base_ = '../swin-t-p4-w7_16xb64_300e_in1k.py'

model = dict(
    backbone=dict(
        attn_cfg=dict(type='WindowAttention', relative_position=False)))
