"""Plot training curves and evaluation results from mmengine logs.

    # loss (default) of one run; a work dir, a run dir, a scalars.json or a
    # text .log are all accepted
    python tools/analysis_tools/analyze_logs.py plot_curve work_dirs/demo \\
        --out loss.png
    # several runs, one curve each, losses above and metrics below
    python tools/analysis_tools/analyze_logs.py plot_curve WORK_A WORK_B \\
        --keys loss coco/bbox_mAP --legend A B --out curves.png
    # seconds per iteration
    python tools/analysis_tools/analyze_logs.py cal_train_time work_dirs/demo

mmdet's and mmseg's own analyze_logs.py read the 2.x json logs (one dict per
epoch); mmengine writes ``<work_dir>/<timestamp>/vis_data/scalars.json``
instead (one json line per logged training iteration, each evaluation a line
of its metrics) next to the text log ``<timestamp>/<timestamp>.log``. A work
dir holds one timestamp folder per run (training, resumed training, each
tools/test.py): they are merged in time order, so a ``tools/test.py`` result
lands at the iteration its training run ended with.

Curves are read from the json lines when a run wrote them and from the text
log otherwise (e.g. without mmengine's LocalVisBackend; 4 decimals there).
Evaluation results are placed at the last training iteration logged before
them (with iteration-based training, at the json's ``step``).
"""
import argparse
import glob
import json
import os.path as osp
import re
from typing import Dict, List, Optional, Sequence, Tuple

# The x axis, not curves; evaluation lines also log their own duration.
_X_KEYS = ('iter', 'step', 'epoch')
_EVAL_SKIP = _X_KEYS + ('time', 'data_time', 'eta', 'memory')

# 2026/11/29 19:16:57 - mmengine - INFO - Iter(train) [ 10/200]  base_lr: ...
# ... Epoch(train)  [1][ 50/500]  ...   /   Epoch(val) [1][5/5]  mIoU: ...
_LINE = re.compile(r'(Iter|Epoch)\((train|val|test)\)\s*'
                   r'(?:\[\s*(\d+)\])?\s*\[\s*(\d+)/(\d+)\]\s*(.*)$')
_ITEM = re.compile(r'([^\s:]+): (\S+)')


class Curves(dict):
    """``key -> (steps, values)``, steps being training iterations;
    ``metrics`` holds the keys that came from evaluation."""

    def __init__(self, path: str = ''):
        super().__init__()
        self.path = path
        self.metrics = set()


def _floats(items: Dict[str, object], skip: Sequence[str]) -> dict:
    out = {}
    for key, value in items.items():
        if key in skip or isinstance(value, bool):
            continue
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            pass  # eta: 0:07:37, tensors printed by custom metrics, ...
    return out


def _json_records(path: str) -> List[Tuple[str, Optional[int], dict]]:
    """(kind, step, scalars) of each json line: training lines carry
    ``iter``, the others are evaluation results (whose ``step`` is the
    iteration only in iteration-based runs: epoch-based ones log epochs)."""
    records, by_epoch = [], False
    with open(path) as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if n < len(lines):
                raise ValueError(f'{path}:{n}: not a json line ({e})')
            break  # the last line of a run killed while writing it
        if 'iter' in rec:
            by_epoch = by_epoch or 'epoch' in rec
            records.append(('train', int(rec['iter']), _floats(rec, _X_KEYS)))
        else:
            step = None if by_epoch or 'step' not in rec else int(rec['step'])
            records.append(('eval', step, _floats(rec, _EVAL_SKIP)))
    return records


def _text_records(path: str) -> List[Tuple[str, Optional[int], dict]]:
    """The same from a text log; ``Epoch(train) [e][i/n]`` is iteration
    ``(e - 1) * n + i``."""
    records = []
    with open(path, errors='replace') as f:
        for line in f:
            match = _LINE.search(line)
            if match is None:
                continue
            _, mode, epoch, cur, total, rest = match.groups()
            items = _ITEM.findall(rest)
            if mode == 'train':
                step = int(cur) if epoch is None else \
                    (int(epoch) - 1) * int(total) + int(cur)
                records.append(('train', step, _floats(dict(items), ())))
            else:
                scalars = _floats(dict(items), _EVAL_SKIP)
                if scalars:  # not a progress line (eta / time only)
                    records.append(('eval', None, scalars))
    return records


def _run_files(run_dir: str) -> List[str]:
    """The log files of one run: its json lines if it wrote any (training:
    vis_data/scalars.json; tools/test.py: <timestamp>.json), else its text
    log."""
    name = osp.basename(osp.normpath(run_dir))
    files = [
        p for p in (osp.join(run_dir, 'vis_data', 'scalars.json'),
                    osp.join(run_dir, f'{name}.json')) if osp.isfile(p)
    ]
    if not files and osp.isfile(osp.join(run_dir, f'{name}.log')):
        files = [osp.join(run_dir, f'{name}.log')]
    return files


def log_files(path: str) -> List[str]:
    """The log files ``path`` stands for, oldest run first: a .json/.log
    file itself, a run (timestamp) dir, or a work dir of runs."""
    if osp.isfile(path):
        return [path]
    if not osp.isdir(path):
        raise FileNotFoundError(f'{path}: no such log file or work dir')
    files = _run_files(path)
    if not files:
        for run_dir in sorted(glob.glob(osp.join(path, '*', ''))):
            files += _run_files(run_dir)
    if not files:
        raise FileNotFoundError(
            f'{path}: no mmengine log found (expected <timestamp>/vis_data/'
            'scalars.json or <timestamp>/<timestamp>.log in a work dir)')
    return files


def load_log(path: str) -> Curves:
    """``key -> (steps, values)`` of every scalar logged under ``path``
    (see log_files); runs are merged, a later run's value replacing an
    earlier one's at the same iteration (a resumed run)."""
    points: Dict[str, Dict[int, float]] = {}
    curves = Curves(path)
    last_iter = 0
    for file in log_files(path):
        records = _json_records(file) if file.endswith('.json') else \
            _text_records(file)
        for kind, step, scalars in records:
            if kind == 'train':
                last_iter = step
            else:
                step = last_iter if step is None else step
                curves.metrics.update(scalars)
            for key, value in scalars.items():
                points.setdefault(key, {})[step] = value
    for key in sorted(points):
        steps = sorted(points[key])
        curves[key] = (steps, [points[key][s] for s in steps])
    return curves


def check_keys(curves: Curves, keys: Sequence[str]) -> None:
    """Stop with the key and the log named, and what the log does hold."""
    for key in keys:
        if key not in curves:
            raise KeyError(
                f'key {key!r} is not in the log {curves.path}; available '
                f'keys: {", ".join(sorted(curves)) or "none"}')


def _names(paths: Sequence[str]) -> List[str]:
    """Legend names: each path's run or work dir name, the whole path
    where two of those coincide."""
    names = []
    for path in paths:
        path = osp.normpath(path)
        if osp.basename(path) == 'scalars.json':
            path = osp.dirname(osp.dirname(path))
        names.append(osp.splitext(osp.basename(path))[0])
    if len(set(names)) < len(names):
        names = [osp.normpath(p) for p in paths]
    return names


def plot_curve(logs: Sequence[Curves], keys: Sequence[str], out: str,
               legend: Optional[Sequence[str]] = None,
               title: Optional[str] = None, dpi: int = 100) -> str:
    """Training keys against the iteration on top, evaluation metrics below
    (a second subplot only when metrics are asked for); write ``out``."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    for curves in logs:
        check_keys(curves, keys)
    names = list(legend) if legend else _names([c.path for c in logs])
    if len(names) != len(logs):
        raise ValueError(f'--legend: {len(names)} names for {len(logs)} logs')
    metric_keys = [k for k in keys if any(k in c.metrics for c in logs)]
    groups = [g for g in ([k for k in keys if k not in metric_keys],
                          metric_keys) if g]
    fig, axes = plt.subplots(
        len(groups), 1, figsize=(8, 3.6 * len(groups)), squeeze=False,
        sharex=True)
    for ax, group in zip(axes[:, 0], groups):
        is_metric = group[0] in metric_keys
        for name, curves in zip(names, logs):
            for key in group:
                if len(logs) == 1:
                    label = key
                else:
                    label = name if len(group) == 1 else f'{name}: {key}'
                steps, values = curves[key]
                ax.plot(steps, values, label=label, linewidth=1,
                        marker='o' if is_metric or len(steps) < 3 else None)
        ax.set_ylabel('metric' if is_metric else
                      (group[0] if len(group) == 1 else 'value'))
        ax.grid(alpha=0.3)
        ax.legend(fontsize='small')
    axes[-1, 0].set_xlabel('iteration')
    if title:
        axes[0, 0].set_title(title)
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def train_time(curves: Curves, include_outliers: bool = False) -> dict:
    """Seconds per iteration from the logged ``time`` (each value already
    a mean over the logging interval); the first one, which holds start-up
    work, is left out unless ``include_outliers``."""
    if 'time' not in curves:
        raise KeyError(f'key \'time\' is not in the log {curves.path} (no '
                       'IterTimerHook?)')
    steps, times = curves['time']
    if not include_outliers and len(times) > 1:
        steps, times = steps[1:], times[1:]
    mean = sum(times) / len(times)
    std = (sum((t - mean)**2 for t in times) / len(times))**0.5
    slowest = max(range(len(times)), key=times.__getitem__)
    fastest = min(range(len(times)), key=times.__getitem__)
    return dict(
        mean=mean, std=std, iters=curves['time'][0][-1],
        slowest=(steps[slowest], times[slowest]),
        fastest=(steps[fastest], times[fastest]))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Plot curves or time the iterations of mmengine logs')
    sub = parser.add_subparsers(dest='task', required=True)
    plot = sub.add_parser(
        'plot_curve', help='plot keys against the training iteration')
    plot.add_argument(
        'logs', nargs='+',
        help='work dirs, run (timestamp) dirs, scalars.json or .log files; '
        'one curve each')
    plot.add_argument(
        '--keys', nargs='+', default=['loss'],
        help='what to plot: training keys (loss, loss_rpn_cls, '
        's0.loss_cls, lr, ...) and evaluation metrics (coco/bbox_mAP, '
        'mIoU, ...)')
    plot.add_argument('--out', required=True, help='the PNG to write')
    plot.add_argument('--title', help='figure title')
    plot.add_argument(
        '--legend', nargs='+',
        help='one name per log (default: the work or run dir names)')
    plot.add_argument('--dpi', type=int, default=100, help='PNG resolution')
    timing = sub.add_parser(
        'cal_train_time', help='seconds per training iteration')
    timing.add_argument('logs', nargs='+', help='as for plot_curve')
    timing.add_argument(
        '--include-outliers', action='store_true',
        help='count the first logged interval (start-up) too')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
    except (FileNotFoundError, KeyError, ValueError) as e:
        # a missing key or log is the user's input: no traceback
        raise SystemExit(f'analyze_logs.py {args.task}: {e.args[0]}')


def run(args):
    logs = [load_log(path) for path in args.logs]
    if args.task == 'plot_curve':
        out = plot_curve(logs, args.keys, args.out, args.legend, args.title,
                         args.dpi)
        print(f'saved {", ".join(args.keys)} of {len(logs)} log(s) to {out}')
        return
    for path, curves in zip(args.logs, logs):
        t = train_time(curves, args.include_outliers)
        print(f'{"-" * 5} train time of {path} {"-" * 5}\n'
              f'slowest: {t["slowest"][1]:.4f} s/iter (logged at iter '
              f'{t["slowest"][0]})\n'
              f'fastest: {t["fastest"][1]:.4f} s/iter (logged at iter '
              f'{t["fastest"][0]})\n'
              f'std over logged intervals: {t["std"]:.4f}\n'
              f'average: {t["mean"]:.4f} s/iter, about '
              f'{t["mean"] * t["iters"] / 3600:.2f} h for {t["iters"]} iters')


if __name__ == '__main__':
    main()
