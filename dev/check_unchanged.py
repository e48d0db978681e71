"""What a refactoring must leave unchanged, per config of this repository.

For every config under ``configs/`` (``_base_`` aside) the model is built as
mmengine's Runner builds it (the config's ``custom_imports`` and
``default_scope``), and one line is written per config: its parameter count,
how many parameters and modules ``train()`` freezes, and a SHA-256 of the
backbone's outputs with deterministic weights (each floating tensor drawn
from a generator seeded by its state-dict key) on a fixed input. Equal
hashes mean outputs that differ by exactly 0.0. Each row also keeps a few
of the outputs' values (the same seeded positions in both runs), so where
a hash moved ``--compare`` says by how much those values moved: a
kernel's rounding (about 1e-6 of the largest in float32) reads apart from
a change of the arithmetic.

    python dev/check_unchanged.py > before.jsonl     # on the old commit
    python dev/check_unchanged.py > after.jsonl      # on the new one
    python dev/check_unchanged.py --compare before.jsonl after.jsonl

Run it from the checkout whose package is imported (``PYTHONPATH=.`` for a
second worktree); the first line names the package it imported.
``--backend plain`` hashes the plain path (``mmvisattn.ops.use_backend``):
a change to the CPU fast path's kernels (a linear newly packed) moves the
default hashes by rounding and must leave these as they were.
"""
import argparse
import glob
import hashlib
import json
import os.path as osp
import sys
import zlib

import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope
from mmengine.utils import import_modules_from_strings

import mmvisattn
from mmvisattn.ops import BACKENDS, use_backend

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _configs(pattern):
    paths = glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
    return sorted(p for p in paths if '_base_' not in p
                  and (pattern is None or pattern in p))


def _deterministic_weights(model: torch.nn.Module) -> None:
    """Each floating tensor from a generator seeded by its key: the same
    weights whatever order the modules are built in."""
    with torch.no_grad():
        for key, tensor in model.state_dict(keep_vars=True).items():
            if not tensor.is_floating_point():
                continue
            g = torch.Generator().manual_seed(zlib.crc32(key.encode()))
            value = torch.randn(tensor.shape, generator=g) * 0.05
            if tensor.dim() == 1 and key.endswith('weight'):
                value += 1.  # norm scales around one
            elif key.endswith('running_var'):
                value = value.abs() + 1.  # a variance: BN backbones finite
            tensor.copy_(value)


# values kept per output, at seeded positions
SAMPLES = 64


def _samples(out: torch.Tensor) -> list:
    flat = out.reshape(-1).double()
    g = torch.Generator().manual_seed(0)
    return flat[torch.randint(flat.numel(), (SAMPLES, ), generator=g)].tolist()


def _backbone_outputs(backbone: torch.nn.Module) -> dict:
    """SHA-256 of the backbone's outputs on a fixed input, and a sample of
    their values; the input grows to 32 windows where a classifier refuses
    maps smaller than a window."""
    backbone.eval()
    sizes = [(224, 288)]
    window = getattr(backbone, 'window_size', None)
    if isinstance(window, int):
        sizes.append((32 * window, ) * 2)
    error = None
    for hw in sizes:
        x = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(0))
        try:
            with torch.no_grad():
                outs = backbone(x)
        except Exception as e:  # the next size may fit
            error = e
            continue
        digest, samples = hashlib.sha256(), []
        for out in (outs if isinstance(outs, (tuple, list)) else [outs]):
            digest.update(str(tuple(out.shape)).encode())
            digest.update(out.contiguous().numpy().tobytes())
            samples += _samples(out)
        return dict(backbone_outputs=digest.hexdigest()[:16],
                    backbone_samples=samples)
    return dict(backbone_outputs=f'error: {type(error).__name__}: {error}')


def describe(path: str) -> dict:
    cfg = Config.fromfile(path)
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    torch.manual_seed(0)  # buffers drawn at build (random features)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        model = MODELS.build(cfg.model)
    row = dict(config=osp.relpath(path, ROOT),
               params=sum(p.numel() for p in model.parameters()))
    model.train()
    row['frozen_params'] = sum(p.numel() for p in model.parameters()
                               if not p.requires_grad)
    row['eval_modules'] = sum(not m.training for m in model.modules())
    _deterministic_weights(model)
    row.update(_backbone_outputs(model.backbone))
    return row


def sample_change(a: dict, b: dict):
    """How far the sampled output values moved, relative to the largest of
    them (None where a row has no samples or their shapes differ)."""
    x, y = a.get('backbone_samples'), b.get('backbone_samples')
    if not x or not y or len(x) != len(y):
        return None
    x, y = torch.tensor(x), torch.tensor(y)
    return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item()


def compare(before: str, after: str) -> int:
    def read(path):
        with open(path) as f:
            # mmengine logs to stdout too: only the JSON lines are rows
            rows = [json.loads(line) for line in f if line.startswith("{")]
        return {r['config']: r for r in rows if 'config' in r}

    def shown(row):
        return None if row is None else {
            k: v for k, v in row.items() if k != 'backbone_samples'}

    old, new = read(before), read(after)
    changed, moves = 0, []
    for name in sorted(set(old) | set(new)):
        a, b = shown(old.get(name)), shown(new.get(name))
        if a == b:
            continue
        changed += 1
        print(f'CHANGED {name}\n  before {a}\n  after  {b}')
        if a and b and {k for k in a if a[k] != b.get(k)} == {
                'backbone_outputs'}:
            move = sample_change(old[name], new[name])
            if move is not None:
                moves.append(move)
                print(f'  the outputs alone: sampled values moved by '
                      f'{move:.1e} of their largest')
    summary = f'{len(set(old) & set(new))} configs in both, {changed} changed'
    if moves:
        summary += (f' ({len(moves)} in the outputs alone, sampled values '
                    f'moved by at most {max(moves):.1e} of their largest)')
    print(summary)
    return int(changed > 0)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--only', help='configs whose path contains this')
    parser.add_argument('--compare', nargs=2, metavar=('BEFORE', 'AFTER'))
    parser.add_argument('--backend', default='auto', choices=BACKENDS)
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    print(json.dumps(dict(package=osp.dirname(mmvisattn.__file__))),
          flush=True)
    with use_backend(args.backend):
        for path in _configs(args.only):
            print(json.dumps(describe(path)), flush=True)


if __name__ == '__main__':
    main()
