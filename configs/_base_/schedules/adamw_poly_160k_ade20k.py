# The Swin paper's ADE20K schedule (section 4.3): AdamW lr 6e-5, betas
# (0.9, 0.999), weight decay 0.01 with none on position tables and norms;
# 1500 iterations of linear warmup, then poly (power 1) decay to 0; 160K
# iterations (16 images per batch: 8 GPUs x 2, set with the data).
_base_ = ['mmseg::_base_/default_runtime.py',
          'mmseg::_base_/schedules/schedule_160k.py']

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(
        custom_keys={
            'absolute_pos_embed': dict(decay_mult=0.),
            'relative_position_bias_table': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
        end=1500),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        begin=1500,
        end=160000,
        by_epoch=False)
]
