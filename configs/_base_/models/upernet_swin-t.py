# UperNet with Swin-T (Swin paper, Table 3): mmseg's UperNet for Swin (UPerHead
# on all four stages, pool scales 1/2/3/6, 512 channels, SyncBN; FCN
# auxiliary head on stage 3, loss weight 0.4) with our backbone; drop path
# 0.3 as the official segmentation configs; 150 ADE20K classes.
_base_ = 'mmseg::_base_/models/upernet_swin.py'

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

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
        drop_path_rate=0.3,
        patch_norm=True,
        out_indices=(0, 1, 2, 3),
        with_cp=False),
    decode_head=dict(in_channels=[96, 192, 384, 768], num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150))
