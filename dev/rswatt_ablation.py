"""Does adapting the window matter? Train a small model once per variant and
seed, with the same data, schedule and budget, evaluate each with
tools/test.py, and tabulate the mean and spread per variant beside its
parameters, FLOPs and CPU latency.

Tasks (``--task seg|det|both``), on the RSWAtt benchmark
(dev/make_rswatt_bench.py, data/rswatt_bench):

  seg  configs/demo/upernet_rswatt-n_rswatt-bench-ade.py: UperNet, RSWAtt
       'nano' backbone, 200 iterations, batch 4; metric mIoU (6 classes,
       background included)
  det  configs/demo/retinanet_rswatt-n_rswatt-bench.py: RetinaNet, the same
       backbone, 200 iterations, batch 4; metric COCO bbox mAP

    python dev/make_rswatt_bench.py data/rswatt_bench
    python dev/rswatt_ablation.py --task seg --seeds 0 1 2
    python dev/rswatt_ablation.py --task det --seeds 0 1 2 \\
        --variants fixed swin adaptive ms-gate ms-concat
    # params, FLOPs, latency of every variant; the table from the JSON
    python dev/rswatt_ablation.py --cost --task both
    python dev/rswatt_ablation.py --table

(configs/rswatt/README.md#when-does-the-adaptive-window-pay: the order the
committed runs were made in, and the results.)

Variants (the backbone's only; everything else the task's config):
  fixed              one scale, largest window 9, ``window_predictor=None``
                     (plain sliding-window attention: the baseline)
  swin               Swin window attention (shifted 9x9 windows) in the same
                     'nano' skeleton (64 channels, depths 2/2/2/2)
  adaptive           one scale, 9, predicted windows, ``DirectExtents``
                     (the default predictor)
  adaptive-offset    one scale, 9, ``OffsetExtents`` (the source's)
  adaptive-anchor    one scale, 9, ``AnchorExtents``
  adaptive-enhanced  one scale, 9, ``EnhancedAnchorExtents``
  ms-gate            scales 5 and 9, ``DirectExtents``, ``GateFusion``
                     (the layer's default)
  ms-concat          scales 5 and 9, ``DirectExtents``, ``ConcatFusion``
                     (the source's fusion)

Each run is a separate tools/train.py + tools/test.py process (under
``--work-dir``, default work_dirs/rswatt_ablation/TASK/VARIANT_sSEED); a
finished run (its result.json present) is not run again, so an interrupted
sweep resumes where it stopped. Runs go seed-major (every variant at the
first seed, then the next seed), so a partial sweep covers every variant.
After every run all results found under the work dir are gathered into
``--results`` (default docs/rswatt_ablation.json; the ``cost`` entry that
``--cost`` writes is kept). Seed 0's checkpoint is kept
(``iter_N.pth``, for rswatt_extents.py), the others are deleted.
``--config`` replaces the task's config and then writes
WORK_DIR/results.json unless ``--results`` says otherwise, e.g. the
saturated demo: ``--task seg --config
configs/demo/upernet_rswatt-n_shapes-ade.py --iters 40``.
"""
import argparse
import glob
import json
import os
import os.path as osp
import re
import subprocess
import sys
import time

import numpy as np

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIGS = {
    'seg': osp.join(REPO, 'configs', 'demo',
                    'upernet_rswatt-n_rswatt-bench-ade.py'),
    'det': osp.join(REPO, 'configs', 'demo',
                    'retinanet_rswatt-n_rswatt-bench.py'),
}
METRIC = {'seg': 'mIoU', 'det': 'bbox_mAP'}
NANO = dict(embed_dims=64, depths=(2, 2, 2, 2), num_heads=(2, 4, 8, 16))


def _one_scale(predictor):
    return dict(scale_windows=(9, ),
                attn_cfg=dict(window_predictor=dict(type=predictor)))


VARIANTS = {
    'fixed': dict(scale_windows=(9, ), attn_cfg=dict(window_predictor=None)),
    'swin': dict(_delete_=True, type='mmvisattn.SwinTransformer', arch=NANO,
                 window_size=9, drop_path_rate=0.1,
                 out_indices=(0, 1, 2, 3)),
    'adaptive': _one_scale('DirectExtents'),
    'adaptive-offset': _one_scale('OffsetExtents'),
    'adaptive-anchor': _one_scale('AnchorExtents'),
    'adaptive-enhanced': _one_scale('EnhancedAnchorExtents'),
    'ms-gate': dict(scale_windows=(5, 9)),
    'ms-concat': dict(scale_windows=(5, 9),
                      attn_cfg=dict(fusion=dict(type='ConcatFusion'))),
}
LABELS = {
    'fixed': 'fixed windows, 9 (`window_predictor=None`): baseline',
    'swin': 'Swin shifted 9x9 windows',
    'adaptive': 'adaptive, 9, `DirectExtents`',
    'adaptive-offset': 'adaptive, 9, `OffsetExtents`',
    'adaptive-anchor': 'adaptive, 9, `AnchorExtents`',
    'adaptive-enhanced': 'adaptive, 9, `EnhancedAnchorExtents`',
    'ms-gate': 'adaptive, 5 + 9, `GateFusion` (default)',
    'ms-concat': 'adaptive, 5 + 9, `ConcatFusion`',
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--task', choices=('seg', 'det', 'both'),
                        default='seg')
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS),
                        choices=list(VARIANTS))
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--iters', type=int, default=None,
                        help="training iterations (default: the config's)")
    parser.add_argument('--config', help="replace the task's config")
    parser.add_argument('--work-dir', default='work_dirs/rswatt_ablation')
    parser.add_argument('--results',
                        help='the results JSON (default: '
                        'docs/rswatt_ablation.json, or WORK_DIR/results.json '
                        'with --config)')
    parser.add_argument('--cost', action='store_true',
                        help='measure params, FLOPs and CPU latency of '
                        'every variant (one process) into --results')
    parser.add_argument('--latency-runs', type=int, default=30)
    parser.add_argument('--threads', type=int, default=1,
                        help='torch threads for --cost latency')
    parser.add_argument('--table', action='store_true',
                        help='print the markdown table from --results')
    args = parser.parse_args(argv)
    if args.results is None:
        args.results = osp.join(args.work_dir, 'results.json') \
            if args.config else osp.join(REPO, 'docs',
                                         'rswatt_ablation.json')
    return args


def tasks_of(args):
    return ('seg', 'det') if args.task == 'both' else (args.task, )


def variant_config(folder: str, name: str, base: str = CONFIGS['seg']) -> str:
    path = osp.join(folder, f'{name}.py')
    os.makedirs(folder, exist_ok=True)
    with open(path, 'w') as f:
        f.write(f'_base_ = {base!r}\n'
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


def parse_metrics(task: str, out: str) -> dict:
    """The test log's metrics: seg mIoU, aAcc, mAcc and per-class IoU; det
    the COCO bbox metrics (mAP in %, as mmseg's figures)."""
    if task == 'seg':
        found = re.findall(r'aAcc: ([\d.]+)\s+mIoU: ([\d.]+)\s+mAcc: '
                           r'([\d.]+)', out)
        if not found:
            raise RuntimeError('no mIoU in the test log')
        a, m, c = map(float, found[-1])
        metrics = dict(mIoU=m, aAcc=a, mAcc=c)
        per_class = {}
        for name, iou, _acc in re.findall(
                r'^\|\s*([a-z]+)\s*\|\s*([\d.]+|nan)\s*\|\s*([\d.]+|nan)'
                r'\s*\|', out, re.M):
            per_class[name] = float(iou)
        metrics['IoU'] = per_class
        return metrics
    keys = ('bbox_mAP', 'bbox_mAP_50', 'bbox_mAP_75', 'bbox_mAP_s',
            'bbox_mAP_m', 'bbox_mAP_l')
    metrics = {}
    for k in keys:
        found = re.findall(rf'{k}: ([-\d.]+)', out)
        if not found:
            raise RuntimeError(f'no {k} in the test log')
        metrics[k] = round(100 * float(found[-1]), 1)
    return metrics


def config_iters(config: str) -> int:
    from mmengine.config import Config
    return Config.fromfile(config).train_cfg.max_iters


def train_and_test(task, name, config, work, seed, iters) -> dict:
    done = osp.join(work, 'result.json')
    if osp.exists(done):
        with open(done) as f:
            return json.load(f)
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    run(['tools/train.py', config, '--work-dir', work, '--cfg-options',
         f'randomness.seed={seed}', f'train_cfg.max_iters={iters}',
         f'default_hooks.checkpoint.interval={iters}',
         f'param_scheduler.1.end={iters}'], osp.join(work, 'train.log'))
    t1 = time.time()
    ckpt = osp.join(work, f'iter_{iters}.pth')
    out = run(['tools/test.py', config, ckpt, '--work-dir', work],
              osp.join(work, 'test.log'))
    t2 = time.time()
    result = dict(task=task, variant=name, seed=seed, iters=iters,
                  config=osp.relpath(config, REPO),
                  metrics=parse_metrics(task, out),
                  train_s=round(t1 - t0, 1), test_s=round(t2 - t1, 1),
                  threads=os.environ.get('OMP_NUM_THREADS'),
                  finished=time.strftime('%Y-%m-%d %H:%M:%S UTC',
                                         time.gmtime()))
    with open(done, 'w') as f:
        json.dump(result, f, indent=1)
    if seed != 0:  # seed 0's checkpoint is kept (rswatt_extents.py)
        os.remove(ckpt)
    return result


def load_results(path: str) -> dict:
    if osp.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def write_json(path: str, data: dict):
    tmp = f'{path}.{os.getpid()}.tmp'
    with open(tmp, 'w') as f:
        json.dump(data, f, indent=1)
        f.write('\n')
    os.replace(tmp, path)


def gather(work_dir: str, results: str):
    """Every run's result.json under ``work_dir`` into ``results`` (the
    ``cost`` entry kept)."""
    data = load_results(results)
    runs = []
    for path in sorted(glob.glob(osp.join(work_dir, '*', '*',
                                          'result.json'))):
        with open(path) as f:
            runs.append(json.load(f))
    order = list(VARIANTS)
    runs.sort(key=lambda r: (r['task'], order.index(r['variant']),
                             r['seed']))
    data['runs'] = runs
    data.setdefault('benchmark', dict(
        data='python dev/make_rswatt_bench.py data/rswatt_bench '
        '(400 train, 60 val, 128x128, seed 0)',
        configs={k: osp.relpath(v, REPO) for k, v in CONFIGS.items()},
        metrics='seg: mIoU (%) over 6 classes, background included; det: '
        'COCO bbox mAP (%), 5 classes; 60 validation images'))
    write_json(results, data)


def measure_cost(args):
    """Params and FLOPs (get_flops.py's 'paper' convention: the attention
    matmuls counted) at the benchmark's 128x128, and the median CPU latency
    of the model's tensor forward (batch 1, fp32, eval, ``--threads``
    threads) over ``--latency-runs`` runs after 3 warm-up runs, every
    variant in this one process."""
    import platform

    import torch
    from mmengine.registry import DefaultScope

    from mmvisattn.analysis.flops import build_model, count_config

    torch.set_num_threads(args.threads)
    data = load_results(args.results)
    cost = data.setdefault('cost', {})
    tmp = osp.join(args.work_dir, 'configs')
    for task in tasks_of(args):
        base = args.config or CONFIGS[task]
        for name in args.variants:
            config = variant_config(osp.join(tmp, task), name, base)
            counted = count_config(config, shape=(128, 128))
            from mmengine.config import Config
            model, scope = build_model(Config.fromfile(config))
            model.eval()
            x = torch.randn(1, 3, 128, 128)
            times = []
            with DefaultScope.overwrite_default_scope(scope), \
                    torch.no_grad():
                for i in range(3 + args.latency_runs):
                    t = time.perf_counter()
                    model(x, mode='tensor')
                    if i >= 3:
                        times.append(time.perf_counter() - t)
            cost.setdefault(task, {})[name] = dict(
                params_M=round(counted['params'] / 1e6, 3),
                flops_G=round(counted['flops'] / 1e9, 3),
                latency_ms=round(1e3 * float(np.median(times)), 1),
                latency_iqr_ms=[round(1e3 * float(np.percentile(times, q)), 1)
                                for q in (25, 75)])
            print(task, name, cost[task][name], flush=True)
    data['cost_setup'] = dict(
        input='1x3x128x128, fp32, eval, model(x, mode="tensor")',
        threads=args.threads, runs=args.latency_runs, warmup=3,
        statistic='median', flops='get_flops.py convention paper '
        '(attention matmuls counted), trainable params',
        torch=torch.__version__, machine=platform.processor() or
        platform.machine(),
        measured=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))
    write_json(args.results, data)


def table(results: str) -> str:
    data = load_results(results)
    runs, cost = data.get('runs', []), data.get('cost', {})
    lines = []
    for task in ('seg', 'det'):
        metric = METRIC[task]
        rows = {}
        for r in runs:
            if r['task'] == task:
                rows.setdefault(r['variant'], []).append(r)
        if not rows:
            continue
        iters = sorted({r['iters'] for rs in rows.values() for r in rs})
        what = 'segmentation mIoU (%)' if task == 'seg' else \
            'detection bbox mAP (%)'
        lines += [f'\n**{what}**, {"/".join(map(str, iters))} iterations, '
                  'mean ± std over the seeds listed (std with n-1; - for '
                  'one seed), min-max\n',
                  f'| variant | {metric} | min-max | seeds | '
                  + ('per-class IoU mean (bg/square/disc/triangle/ring/bar)'
                     if task == 'seg' else 'mean mAP@0.5 / small / medium')
                  + ' | params | FLOPs (128x128) | CPU latency |',
                  '|---|---|---|---|---|---|---|---|']
        for name in VARIANTS:
            if name not in rows:
                continue
            v = np.array([r['metrics'][metric] for r in rows[name]])
            std = f'{v.std(ddof=1):.2f}' if len(v) > 1 else '-'
            if task == 'seg':
                cls = ('background', 'square', 'disc', 'triangle', 'ring',
                       'bar')
                extra = '/'.join(
                    f'{np.mean([r["metrics"]["IoU"].get(c, np.nan) for r in rows[name]]):.1f}'
                    for c in cls)
            else:
                extra = ' / '.join(
                    f'{np.mean([r["metrics"][k] for r in rows[name]]):.1f}'
                    for k in ('bbox_mAP_50', 'bbox_mAP_s', 'bbox_mAP_m'))
            c = cost.get(task, {}).get(name)
            cols = (f'{c["params_M"]:.2f}M | {c["flops_G"]:.2f}G | '
                    f'{c["latency_ms"]:.1f} ms') if c else '- | - | -'
            seeds = ','.join(str(r['seed']) for r in rows[name])
            lines.append(f'| {LABELS[name]} | {v.mean():.2f} ± {std} | '
                         f'{v.min():.2f}-{v.max():.2f} | {seeds} | {extra} '
                         f'| {cols} |')
    setup = data.get('cost_setup')
    if setup:
        lines.append(f'\nParams, FLOPs: {setup["flops"]}, at 128x128. '
                     f'Latency: median of {setup["runs"]} runs of '
                     f'{setup["input"]}, {setup["threads"]} thread(s), '
                     f'{setup["measured"]}.')
    return '\n'.join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.table:
        print(table(args.results))
        return
    if args.cost:
        measure_cost(args)
        return
    os.makedirs(args.work_dir, exist_ok=True)
    plan = []
    for task in tasks_of(args):
        base = args.config or CONFIGS[task]
        iters = args.iters or config_iters(base)
        for name in args.variants:
            config = variant_config(
                osp.join(args.work_dir, 'configs', task), name, base)
            plan += [(seed, task, name, config, iters) for seed in args.seeds]
    plan.sort(key=lambda p: p[0])  # seed-major, stable within a seed
    for seed, task, name, config, iters in plan:
        work = osp.join(args.work_dir, task, f'{name}_s{seed}')
        try:
            r = train_and_test(task, name, config, work, seed, iters)
        except RuntimeError as e:  # one failed run does not stop the rest
            print(f'{task} {name} seed {seed}: FAILED: {e}', flush=True)
            continue
        print(f'{task} {name} seed {seed}: {METRIC[task]} '
              f'{r["metrics"][METRIC[task]]} (train {r["train_s"]} s, '
              f'test {r["test_s"]} s)', flush=True)
        gather(args.work_dir, args.results)
    print(table(args.results))


if __name__ == '__main__':
    main()
