# 3x schedule of the Swin paper: 36 epochs, lr x0.1 at 27 and 33, linear
# warmup over 500 iterations from 0.001 x lr (the detection release's
# configs/_base_/schedules/schedule_1x.py, which its Swin configs keep);
# AdamW lr 1e-4, wd 0.05, no decay on position tables and norms.
_base_ = ['mmdet::_base_/schedules/schedule_1x.py',
          'mmdet::_base_/default_runtime.py']

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[27, 33],
        gamma=0.1)
]
optim_wrapper = dict(
    type='OptimWrapper',
    paramwise_cfg=dict(
        custom_keys={
            'absolute_pos_embed': dict(decay_mult=0.),
            'relative_position_bias_table': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)
        }),
    optimizer=dict(
        _delete_=True,
        type='AdamW',
        lr=0.0001,
        betas=(0.9, 0.999),
        weight_decay=0.05))
auto_scale_lr = dict(enable=False, base_batch_size=16)
