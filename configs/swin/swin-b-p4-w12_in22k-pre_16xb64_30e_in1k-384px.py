# Swin-B 22K -> 1K fine-tuned at 384, window 12 (Table 1b: 88M, 47.0G,
# 86.4 top-1).
_base_ = '../_base_/classification/swin_finetune_in1k_30e_384px.py'
pretrained = 'work_dirs/swin-b-p4-w7_64xb64_90e_in22k/epoch_90.pth'
model = dict(
    backbone=dict(
        arch='base',
        window_size=12,
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      prefix='backbone.')),
    head=dict(in_channels=1024))
