# 1x schedule of the Swin paper's COCO recipe: 12 epochs, lr x0.1 at 8 and
# 11, linear warmup; the optimizer is the 3x recipe's (AdamW lr 1e-4,
# wd 0.05, no decay on position tables and norms, batch 16).
_base_ = './adamw_3x.py'

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[8, 11],
        gamma=0.1)
]
