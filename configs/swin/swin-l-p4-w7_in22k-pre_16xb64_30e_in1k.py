# Swin-L 22K -> 1K fine-tuned at 224 (Table 1b: 197M, 34.5G, 86.3 top-1).
_base_ = '../_base_/classification/swin_finetune_in1k_30e.py'
pretrained = 'work_dirs/swin-l-p4-w7_64xb64_90e_in22k/epoch_90.pth'
model = dict(
    backbone=dict(
        arch='large',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      prefix='backbone.')),
    head=dict(in_channels=1536))
