# Swin-B at 384x384, window 12, fine-tuned 30 epochs from the 1K 224 model
# (Table 1a: 88M, 47.0G, 84.5 top-1). Head and backbone come from it.
_base_ = '../_base_/classification/swin_finetune_in1k_30e_384px.py'
pretrained = 'work_dirs/swin-b-p4-w7_16xb64_300e_in1k/epoch_300.pth'
model = dict(
    backbone=dict(
        arch='base',
        window_size=12,
        drop_path_rate=0.5,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      prefix='backbone.')),
    head=dict(
        in_channels=1024,
        init_cfg=dict(_delete_=True, type='Pretrained',
                      checkpoint=pretrained, prefix='head.')))
