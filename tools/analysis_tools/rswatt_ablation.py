"""Does adapting the window matter? Train the small UperNet of
``configs/demo/upernet_rswatt-n_shapes-ade.py`` (RSWAtt 'nano' backbone,
200 iterations on the generated shapes, ADE layout) once per variant and
seed, with the same data, schedule and budget, then evaluate each with
tools/test.py and print mIoU mean and spread per variant:

    python tools/make_demo_data.py data/shapes
    python tools/analysis_tools/rswatt_ablation.py --seeds 0 1 2 \\
        --work-dir work_dirs/rswatt_ablation

Variants (the RSWAtt layer's parts; everything else the demo config's):
  fixed      one scale, largest window 9, ``window_predictor=None`` (plain
             sliding-window attention: the baseline)
  adaptive   one scale, largest window 9, predicted windows
  ms-gate    scales 5 and 9, predicted windows, per-pixel gate (default)
  ms-concat  scales 5 and 9, predicted windows, the source's fusion
             (``ConcatFusion``)
  swin       Swin window attention (shifted 9x9 windows) in the same
             'nano' skeleton (64 channels, depths 2/2/2/2)

Each run is a separate tools/train.py + tools/test.py process; results go
to ``WORK_DIR/results.json`` and a markdown table is printed. A finished
run (its metrics file present) is not run again.
"""
import argparse
import json
import os
import os.path as osp
import re
import subprocess
import sys

import numpy as np

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
BASE = osp.join(REPO, 'configs', 'demo', 'upernet_rswatt-n_shapes-ade.py')
NANO = dict(embed_dims=64, depths=(2, 2, 2, 2), num_heads=(2, 4, 8, 16))
VARIANTS = {
    'fixed': dict(window_sizes=(9, ), attn_cfg=dict(window_predictor=None)),
    'adaptive': dict(window_sizes=(9, )),
    'ms-gate': dict(window_sizes=(5, 9)),
    'ms-concat': dict(window_sizes=(5, 9),
                      attn_cfg=dict(fusion=dict(type='ConcatFusion'))),
    'swin': dict(_delete_=True, type='mmvisattn.SwinTransformer', arch=NANO,
                 window_size=9, drop_path_rate=0.1,
                 out_indices=(0, 1, 2, 3)),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS),
                        choices=list(VARIANTS))
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--iters', type=int, default=200)
    parser.add_argument('--work-dir', default='work_dirs/rswatt_ablation')
    return parser.parse_args(argv)


def variant_config(folder: str, name: str) -> str:
    path = osp.join(folder, f'{name}.py')
    with open(path, 'w') as f:
        f.write(f'_base_ = {BASE!r}\n'
                f'model = dict(backbone={VARIANTS[name]!r})\n')
    return path


def run(args, log):
    with open(log, 'w') as f:
        proc = subprocess.run([sys.executable, *args], cwd=REPO, stdout=f,
                              stderr=subprocess.STDOUT)
    if proc.returncode:
        raise RuntimeError(f'{" ".join(args)} failed; see {log}')
    with open(log) as f:
        return f.read()


def train_and_test(config: str, work: str, seed: int, iters: int) -> float:
    done = osp.join(work, 'miou.json')
    if osp.exists(done):
        with open(done) as f:
            return json.load(f)['mIoU']
    os.makedirs(work, exist_ok=True)
    run(['tools/train.py', config, '--work-dir', work, '--cfg-options',
         f'randomness.seed={seed}', f'train_cfg.max_iters={iters}',
         f'default_hooks.checkpoint.interval={iters}',
         f'param_scheduler.1.end={iters}'], osp.join(work, 'train.log'))
    ckpt = osp.join(work, f'iter_{iters}.pth')
    out = run(['tools/test.py', config, ckpt, '--work-dir', work],
              osp.join(work, 'test.log'))
    found = re.findall(r'mIoU: ([\d.]+)', out)
    if not found:
        raise RuntimeError(f'no mIoU in {work}/test.log')
    miou = float(found[-1])
    with open(done, 'w') as f:
        json.dump(dict(mIoU=miou, seed=seed), f)
    return miou


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.work_dir, exist_ok=True)
    results = {}
    for name in args.variants:
        config = variant_config(args.work_dir, name)
        results[name] = [
            train_and_test(config, osp.join(args.work_dir, f'{name}_s{s}'),
                           s, args.iters) for s in args.seeds
        ]
        print(f'{name}: mIoU {results[name]}', flush=True)
    with open(osp.join(args.work_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    print(f'\n| variant | mIoU mean | spread (std, min-max) | seeds |')
    print('|---|---|---|---|')
    for name, values in results.items():
        v = np.array(values)
        print(f'| {name} | {v.mean():.2f} | {v.std():.2f}, {v.min():.2f}-'
              f'{v.max():.2f} | {len(v)} |')


if __name__ == '__main__':
    main()
