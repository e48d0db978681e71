# HTC++'s 6x schedule (Swin paper, appendix A2.2): 72 epochs, lr x0.1 at
# epochs 63 and 69; AdamW lr 1e-4, wd 0.05, linear warmup, no decay on
# position tables and norms, as the paper's 3x schedule.
_base_ = './adamw_3x.py'

max_epochs = 72
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[63, 69],
        gamma=0.1)
]
# 72 epochs: keep the last three checkpoints only
default_hooks = dict(checkpoint=dict(max_keep_ckpts=3))
