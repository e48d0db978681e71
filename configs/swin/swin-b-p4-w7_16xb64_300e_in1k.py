# Swin-B on ImageNet-1K from scratch (Table 1a: 88M, 15.4G, 83.5 top-1).
_base_ = '../_base_/classification/swin_in1k_300e.py'
model = dict(
    backbone=dict(arch='base', drop_path_rate=0.5),
    head=dict(in_channels=1024))
