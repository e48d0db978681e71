# Swin paper (arXiv 2103.14030v2), Table 4, "abs. pos.": ViT's absolute
# position embedding instead of the relative bias. Swin-T, ImageNet-1K, 300
# epochs (Sec. 4.4), the main config with one backbone switch. Paper: 80.5
# top-1 / 95.2 top-5.
_base_ = '../swin-t-p4-w7_16xb64_300e_in1k.py'

model = dict(
    backbone=dict(
        use_abs_pos_embed=True,
        attn_cfg=dict(type='WindowAttention', relative_position=False)))
