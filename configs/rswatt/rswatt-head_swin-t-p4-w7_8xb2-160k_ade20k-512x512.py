# The RSWAtt source's segmentation decoder (mmvisattn.RSWAttHead: the Swin-T
# pyramid fused at 1/4 to 256 channels, 4 RSWAtt layers with 8 heads, then
# conv-BN-ReLU and the classifier) in place of UperNet's head, on the
# UperNet Swin-T ADE20K recipe (512x512, AdamW 6e-5, poly, 160K iterations,
# batch 16) with its auxiliary FCN head.
_base_ = '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'  # noqa

model = dict(
    decode_head=dict(
        _delete_=True,
        type='mmvisattn.RSWAttHead',
        in_channels=[96, 192, 384, 768],
        in_index=[0, 1, 2, 3],
        channels=256,
        num_layers=4,
        num_heads=8,
        window_sizes=(5, 9),
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)))
