# UperNet with Swin-T (Swin paper, Table 3): mmseg's UperNet for Swin (UPerHead
# on all four stages, pool scales 1/2/3/6, 512 channels, SyncBN; FCN
# auxiliary head on stage 3, loss weight 0.4) with our backbone; drop path
# 0.3 as the official segmentation configs; 150 ADE20K classes.
_base_ = ['mmseg::_base_/models/upernet_swin.py', './swin-t_backbone.py']

custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    backbone=dict(_base_.swin_t_backbone, _delete_=True, drop_path_rate=0.3),
    decode_head=dict(in_channels=_base_.swin_t_channels, num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150))
