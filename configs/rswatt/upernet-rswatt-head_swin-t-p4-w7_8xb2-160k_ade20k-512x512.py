# UperNet Swin-T on ADE20K (the Swin-T recipe) with the RSWAtt decoder:
# mmseg's UPerHead plus one RSWAtt block (largest windows 5 and 9, 16 heads
# on its 512 channels) on the fused 1/4-resolution map before the
# classifier.
_base_ = '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'  # noqa

model = dict(
    decode_head=dict(
        type='mmvisattn.RSWAttUPerHead',
        num_rswatt_blocks=1,
        scale_windows=(5, 9),
        num_heads=16))
