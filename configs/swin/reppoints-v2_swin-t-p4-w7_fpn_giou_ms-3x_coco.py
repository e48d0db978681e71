# Swin paper, Table 2(a): RepPoints v2 with Swin-T (ImageNet-1K), the R-50
# config with the backbone swapped (same recipe: multi-scale 480..800,
# AdamW lr 1e-4 wd 0.05, batch 16, 3x). Paper: 50.0 box AP, 45M, 283G.
# FPN keeps RepPoints' settings (start_level=1, extra convs on the input,
# P3-P7), only its in_channels change; drop path 0.2 as for Swin-T at 3x.
_base_ = './reppoints-v2_r50_fpn_giou_ms-3x_coco.py'

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.SwinTransformer',
        arch='tiny',
        window_size=7,
        mlp_ratio=4,
        qkv_bias=True,
        drop_rate=0.,
        attn_drop_rate=0.,
        drop_path_rate=0.2,
        patch_norm=True,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 768]))
