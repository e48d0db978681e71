# Swin paper (arXiv 2103.14030v2), Table 4, "abs.+rel. pos.": both. Swin-T,
# ImageNet-1K, 300 epochs (Sec. 4.4), the main config with one backbone
# switch. Paper: 81.3 top-1 / 95.6 top-5.
_base_ = '../swin-t-p4-w7_16xb64_300e_in1k.py'

model = dict(
    backbone=dict(
        use_abs_pos_embed=True))
