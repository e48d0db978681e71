# TNT-B with the TNT-S recipe (TNT paper: 65.6M, 14.1G, 82.9 top-1).
_base_ = './tnt-s-p16_16xb64_300e_in1k.py'
model = dict(backbone=dict(arch='base'), head=dict(in_channels=640))
