# Swin-B pre-trained on ImageNet-22K (Table 1b's pre-training), 90 epochs.
_base_ = '../_base_/classification/swin_in22k_90e.py'
model = dict(
    backbone=dict(arch='base', drop_path_rate=0.2),
    head=dict(in_channels=1024))
