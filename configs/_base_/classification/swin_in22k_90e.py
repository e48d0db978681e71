# The Swin paper's ImageNet-22K pre-training (section 4.1): 90 epochs, AdamW
# lr 1e-3 at batch 4096, weight decay 0.01, linear decay after 5 linear
# warm-up epochs, the same augmentation and regularisation as the 1K recipe.
# 64 GPUs x 64 images. Data: mmpretrain's ImageNet21k layout under
# data/imagenet21k/ (meta/train.txt, meta/val.txt, train/, val/).
_base_ = './swin_in1k_300e.py'

num_classes = 21841
data_root = 'data/imagenet21k'
data_preprocessor = dict(num_classes=num_classes)
model = dict(
    data_preprocessor=dict(num_classes=num_classes),
    head=dict(num_classes=num_classes))
train_dataloader = dict(
    batch_size=64,
    dataset=dict(type='ImageNet21k', data_root=data_root, split='train'))
val_dataloader = dict(
    dataset=dict(type='ImageNet21k', data_root=data_root, split='val'))
test_dataloader = val_dataloader

optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='LinearLR', start_factor=1.0, end_factor=0.0, by_epoch=True,
         begin=5, end=90, convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=90)
auto_scale_lr = dict(base_batch_size=4096)
