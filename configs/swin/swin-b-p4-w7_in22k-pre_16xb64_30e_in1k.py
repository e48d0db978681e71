# Swin-B 22K -> 1K fine-tuned at 224 (Table 1b: 88M, 15.4G, 85.2 top-1).
# A new 1000-class head; the backbone from the 22K model.
_base_ = '../_base_/classification/swin_finetune_in1k_30e.py'
pretrained = 'work_dirs/swin-b-p4-w7_64xb64_90e_in22k/epoch_90.pth'
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      prefix='backbone.')),
    head=dict(in_channels=1024))
