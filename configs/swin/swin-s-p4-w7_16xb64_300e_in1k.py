# Swin-S on ImageNet-1K from scratch (Table 1a: 50M, 8.7G, 83.0 top-1).
_base_ = '../_base_/classification/swin_in1k_300e.py'
model = dict(
    backbone=dict(arch='small', drop_path_rate=0.3),
    head=dict(in_channels=768))
