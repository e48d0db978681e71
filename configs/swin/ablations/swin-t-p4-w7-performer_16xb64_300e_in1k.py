# Swin paper (arXiv 2103.14030v2), Table 6, "Performer": FAVOR+ linear
# attention over the whole map; a relative bias needs windows, so it takes
# the absolute embedding (the paper does not say which). Swin-T, ImageNet-1K,
# 300 epochs (Sec. 4.4), the main config with one backbone switch. Paper:
# 79.0 top-1 / 94.2 top-5.
_base_ = '../swin-t-p4-w7_16xb64_300e_in1k.py'

model = dict(
    backbone=dict(
        use_abs_pos_embed=True,
        attn_cfg=dict(type='PerformerAttention')))
