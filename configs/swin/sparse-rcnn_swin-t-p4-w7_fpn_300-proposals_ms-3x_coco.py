# Swin paper, Table 2(a): Sparse R-CNN with Swin-T (ImageNet-1K), 300
# proposals, multi-scale training (480..800, <= 1333), AdamW lr 1e-4
# wd 0.05, batch 16, 3x. Paper: 47.9 box AP. The R-50 config with the
# backbone swapped (FPN in_channels [96, 192, 384, 768], mmdet's Sparse
# R-CNN neck otherwise); drop path 0.2 as for Swin-T at 3x. The official
# repository publishes no Sparse R-CNN config.
_base_ = './sparse-rcnn_r50_fpn_300-proposals_ms-3x_coco.py'

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

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
