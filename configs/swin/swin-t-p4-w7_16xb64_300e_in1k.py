# Swin-T on ImageNet-1K from scratch (Table 1a: 28M, 4.5G, 81.3 top-1).
_base_ = '../_base_/classification/swin_in1k_300e.py'
