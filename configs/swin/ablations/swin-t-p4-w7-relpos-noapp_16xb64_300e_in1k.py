# Swin paper (arXiv 2103.14030v2), Table 4, "rel. pos. w/o app.": the
# relative bias without the q.k term. Swin-T, ImageNet-1K, 300 epochs (Sec.
# 4.4), the main config with one backbone switch. Paper: 79.3 top-1 / 94.7
# top-5.
_base_ = '../swin-t-p4-w7_16xb64_300e_in1k.py'

model = dict(
    backbone=dict(
        attn_cfg=dict(type='WindowAttention', use_content=False)))
