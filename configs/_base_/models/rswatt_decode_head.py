# The RSWAtt source's segmentation decoder (mmvisattn.RSWAttHead: a Swin-T
# scale pyramid fused at 1/4 to 256 channels, 4 RSWAtt layers with 8 heads,
# conv-BN-ReLU, the classifier conv) for ADE20K's 150 classes, for configs
# that put it in another segmentor's place:
#     _base_ = ['<that segmentor's config>',
#               '../_base_/models/rswatt_decode_head.py']
#     model = dict(decode_head=dict(_base_.rswatt_decode_head, _delete_=True))
# Only rswatt_* keys here, so it sits beside any other base.
rswatt_decode_head = dict(
    type='mmvisattn.RSWAttHead',
    in_channels=[96, 192, 384, 768],
    in_index=[0, 1, 2, 3],
    channels=256,
    num_layers=4,
    num_heads=8,
    scale_windows=(5, 9),
    dropout_ratio=0.1,
    num_classes=150,
    norm_cfg=dict(type='SyncBN', requires_grad=True),
    align_corners=False,
    loss_decode=dict(
        type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0))
