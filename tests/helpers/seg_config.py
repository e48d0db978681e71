"""A small UperNet config for runs that compare process layouts or resume,
and the environment the tools run in."""
import os
import os.path as osp

from helpers import HELPERS, REPO

SEG_DEMO = osp.join(REPO, 'configs', 'demo', 'upernet_swin-t_shapes-ade.py')
ITERS = 4


def tool_env(**extra):
    """One thread per process, this checkout and tests/helpers importable
    (configs import dist_probe), a port of this run's own."""
    return dict(
        os.environ,
        OMP_NUM_THREADS='1',
        MKL_NUM_THREADS='1',
        PYTHONPATH=os.pathsep.join([REPO, HELPERS,
                                    os.environ.get('PYTHONPATH', '')]),
        PORT=str(29700 + os.getpid() % 200),
        **extra)


def small_seg_config(folder, data_root, batch_size, max_iters=ITERS,
                     probe=True, drop_path=0.0, embed_dims=32, interval=2,
                     max_keep=2, flip=False, name=None):
    """UperNet on a narrow Swin at 64x64 with no random augmentation, drop
    path or dropout, so that runs differing only in their process layout see the same
    arithmetic."""
    path = osp.join(folder, name or f'seg_b{batch_size}.py')
    dims = [embed_dims * 2**i for i in range(4)]
    flip_step = "\n    dict(type='RandomFlip', prob=0.5)," if flip else ''

    imports = ['mmvisattn'] + (['dist_probe'] if probe else [])
    with open(path, 'w') as f:
        f.write(f'''
_base_ = {SEG_DEMO!r}
custom_imports = dict(imports={imports!r}, allow_failed_imports=False)
crop_size = (64, 64)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(embed_dims={embed_dims}, depths=(1, 1, 2, 1),
                  num_heads=(1, 2, 4, 8), drop_path_rate={drop_path}),
    decode_head=dict(in_channels={dims}, channels=32, dropout_ratio=0.0),
    auxiliary_head=dict(in_channels={dims[2]}, channels=16,
                        dropout_ratio=0.0))
pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='Resize', scale=crop_size, keep_ratio=False),{flip_step}
    dict(type='PackSegInputs')
]
train_dataloader = dict(
    batch_size={batch_size},
    sampler=dict(type='InfiniteSampler', shuffle=False),
    dataset=dict(data_root={data_root!r}, pipeline=pipeline))
test_dataloader = dict(dataset=dict(data_root={data_root!r}, pipeline=pipeline))
train_cfg = dict(max_iters={max_iters})
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
default_hooks = dict(
    logger=dict(interval=1),
    checkpoint=dict(interval={interval}, max_keep_ckpts={max_keep}))
custom_hooks = {"[dict(type='RankProbeHook')]" if probe else '[]'}
randomness = dict(seed=0, deterministic=True)
''')
    return path
