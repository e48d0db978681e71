"""Attention-variant speed: the Swin paper's Table 5, re-run on this device.

    python dev/benchmark_attention.py
        [--mode table|scaling|all]
        [--device cpu|cuda] [--repeats N] [--heavy-repeats N] [--quick]
        [--batch B] [--backbone-shape H W] [--archs tiny small base]
        [--infer-shape 800 1216] [--train-shape 512 512]
        [--sizes 256 384 512 640 768] [--global-limit 20] [--threads T]

``--mode table`` (part of ``all``, the default) prints three sections:

(a) MSA per stage: one attention layer (``SwinAttention``, inference:
    ``eval()`` + ``torch.no_grad()``) on the Swin-T stage shapes of a 224x224
    input (56x56 C=96 3 heads, 28x28 C=192 6 heads, 14x14 C=384 12 heads,
    7x7 C=768 24 heads; window 7; ``--batch``, default 1), for every variant
    of Table 5 plus global MSA and mmdet 3.3.0's ``ShiftWindowMSA`` (the
    peer implementation). Windowed rows time the *shifted* block
    (shift_size = window // 2 = 3, also on the 7x7 map, as the paper's
    padding row implies). Columns: milliseconds per layer and "x cyclic" =
    time / time of the cyclic-shift row at that stage (> 1: slower than
    ours). A second table repeats the paper's numbers in the same layout.
    The mmdet row is first checked against ours (same weights, cyclic
    shift): the max |difference| is printed.
(b) Whole backbone throughput (images/s, ``--batch`` images of
    ``--backbone-shape``, default 1x3x224x224, inference): Swin-T/S/B ours vs
    mmdet's SwinTransformer carrying the same weights (``build_pair`` of
    benchmark_backbone.py; max |output difference| printed), "ours/mmdet" =
    our time / mmdet's time (< 1: ours faster); then Swin-T with each
    attention variant, "x cyclic" = time / time of the default variant, next
    to the paper's Swin-T ratio (FPS of cyclic / FPS of the variant).
(c) Fast-path check, Swin-T (``--archs``' first entry) ours vs mmdet:
    inference 1x3x800x1216 and one training step (forward + backward of the
    sum of the output means) at 1x3x512x512; time ratio ours/mmdet (targets
    <= 0.67 and <= 0.8) and peak memory ratio ours/mmdet (target <= 1.0).
    Peak memory is taken from a fresh subprocess per model, in the steady
    state (after one warm-up step, gradients kept allocated as in training;
    our prepacked oneDNN weights, about the size of the linear weights, are
    then resident and not counted): on CPU
    the rise of the peak resident size (``VmHWM``, reset to the current
    size through /proc/self/clear_refs right before the step) above the
    resident size before the step (torch's CPU allocations are invisible to
    tracemalloc; ``ru_maxrss`` is not used because Linux carries the
    parent's resident size into a child's across fork + exec), on CUDA
    ``torch.cuda.max_memory_allocated`` minus the memory allocated before
    the step. A "(>=)" mark means the peak could not be reset and the
    process's earlier high-water mark hid the step's peak: a lower bound.

``--mode memory --large H W [--large-variants]``: only the large-image
memory probes of ``--large`` (below), for the RSWAtt-T backbone and, with
``--large-variants``, for each of its layer variants (fixed windows, the
concat fusion over 4/8/16, the offset predictor, the enhanced anchors): peak
memory at 1/2, 3/4 and all of H x W, and the fitted exponent.

``--mode scaling`` (part of ``all``): one stage-1 layer (C=96, 3 heads,
(s/4)^2 tokens) for input sizes s = ``--sizes`` (default 256..768) with
cyclic shifted windows, the blocked sliding-window kernel, RSWAtt
(reconstructed sliding windows: one largest window of 7, and the fused
5 + 9 pair) and global MSA (``F.scaled_dot_product_attention``, no
position). log(time) = a + b
log(pixels) is fitted by least squares; b ~ 1 means linear in the image
area (windows), b ~ 2 quadratic (global). Maps whose side is not a
multiple of 7 are padded (64 -> 70 tokens at 256^2: +20% work, 1-8% at the
larger sizes), which pulls the window exponents slightly below 1. A
global run slower than ``--global-limit`` seconds (or predicted to be,
from the previous size and b = 2) drops that size and larger ones for
global; the output says so.

Timing: every callable runs once to warm up (allocator, caches, kernel
selection), then the rows of a table alternate repeat by repeat so the
machine's drift hits all alike; medians are printed. ``--repeats`` (5) is
used for cheap rows, ``--heavy-repeats`` (5) for the 800x1216 inference,
the training step and scaling points whose warm-up took over a second.
Only the RATIOS are meant to be read: the absolute times depend on the
device and, on a shared CPU, on the neighbours (the first line prints the
load average; when it exceeds the core count, ``--threads 1`` gives much
steadier numbers than threads that keep waiting for each other). Nothing
here asserts a timing. ``--quick`` (smoke test) uses one repeat, Swin-T
only, sizes 224, 320 and 448, and small fast-path shapes (320x320
inference, 224x224 train) instead of 800x1216 / 512x512.

Paper reference (Liu et al., "Swin Transformer", arXiv 2103.14030, Table 5,
V100 GPU): "MSA in a stage (ms)" for stages 1-4 and "Arch. (FPS)" for
Swin-T/S/B:

    sliding window (naive)    122.5 38.3 12.1 7.6   183 109  77
    sliding window (kernel)     7.6  4.7  2.7 1.8   488 283 187
    Performer                   4.8  2.8  1.8 1.5   638 370 241
    window (w/o shifting)       2.8  1.7  1.2 0.9   770 444 280
    shifted window (padding)    3.3  2.3  1.9 2.2   670 371 236
    shifted window (cyclic)     3.0  1.9  1.3 1.0   755 437 278

These are quoted from memory, not from a copy of the paper read here; they
agree with the paper's text (cyclic vs padding: 13%/18%/18% faster for
Swin-T/S/B; shifted window 40.8x/2.5x faster than naive/kernel sliding
window in MSA on stage 1; Swin-T/S/B 4.1/1.5, 4.0/1.5, 3.6/1.5 times
faster than naive/kernel sliding window). The batch size is not restated
in the table; the throughput protocol of the paper (and this tool's brief)
uses batch 64, so the rows are labelled "paper (V100, batch 64)". Global
MSA and mmdet have no paper numbers ("-").
"""
import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
from mmengine.logging import MMLogger

import mmvisattn  # noqa: F401
from mmvisattn.analysis.benchmark import build_pair
from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.models.layers.window_msa import build_swin_attention

WINDOW = 7
# (H = W, C, heads) of Swin-T's four stages for a 224x224 input
STAGES = ((56, 96, 3), (28, 192, 6), (14, 384, 12), (7, 768, 24))
# (row label, attn_cfg, paper key)
VARIANTS = (
    ('cyclic shift (ours, default)', dict(), 'cyclic'),
    ('padding shift', dict(type='WindowAttention', shift_mode='padding'),
     'padding'),
    ('no shift (W-MSA only)', dict(type='WindowAttention', shift_mode='none'),
     'noshift'),
    ('sliding window (naive)', dict(type='SlidingWindowAttention'), 'naive'),
    ('sliding window (blocked kernel)', dict(type='HaloSlidingWindowAttention'),
     'kernel'),
    ('Performer', dict(type='PerformerAttention'), 'performer'),
    ('global MSA', dict(type='GlobalAttention'), None),
)
MMDET_ROW = 'mmdet SW-MSA'
# Table 5 of arXiv 2103.14030 (V100): ms of the MSA in each stage (Swin-T)
PAPER_MSA_MS = {
    'naive': (122.5, 38.3, 12.1, 7.6),
    'kernel': (7.6, 4.7, 2.7, 1.8),
    'performer': (4.8, 2.8, 1.8, 1.5),
    'noshift': (2.8, 1.7, 1.2, 0.9),
    'padding': (3.3, 2.3, 1.9, 2.2),
    'cyclic': (3.0, 1.9, 1.3, 1.0),
}
# ... and whole-network FPS for Swin-T, Swin-S, Swin-B
PAPER_FPS = {
    'naive': (183, 109, 77),
    'kernel': (488, 283, 187),
    'performer': (638, 370, 241),
    'noshift': (770, 444, 280),
    'padding': (670, 371, 236),
    'cyclic': (755, 437, 278),
}
PAPER_LABEL = 'paper (V100, batch 64)'
ARCH_NAMES = {'tiny': 'Swin-T', 'small': 'Swin-S', 'base': 'Swin-B',
              'large': 'Swin-L'}


# ----------------------------------------------------------------- timing
def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(fn, device):
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def bench(fns, repeats, device, warmup=True):
    """Median seconds of each callable in ``fns`` (name -> fn).

    ``repeats`` is an int or a dict name -> int. Each callable is warmed up
    once (unless the caller already ran it), then the callables alternate
    repeat by repeat.
    """
    if isinstance(repeats, int):
        repeats = {name: repeats for name in fns}
    for fn in fns.values() if warmup else ():
        fn()
    sync(device)
    times = {name: [] for name in fns}
    for r in range(max(repeats.values(), default=0)):
        for name, fn in fns.items():
            if r < repeats[name]:
                times[name].append(timed(fn, device))
    return {name: statistics.median(t) for name, t in times.items()}


def fmt(value, spec, width):
    return f'{"-":>{width}}' if value is None else f'{value:{width}{spec}}'


def max_diff(a, b):
    if isinstance(a, torch.Tensor):
        a, b = (a, ), (b, )
    return max((x.float() - y.float()).abs().max().item()
               for x, y in zip(a, b))


# ------------------------------------------------------- (a) MSA per stage
def mmdet_msa(embed_dims, num_heads, ours):
    """mmdet's ShiftWindowMSA (shift = window // 2) with ``ours``' weights."""
    from mmdet.models.backbones.swin import ShiftWindowMSA
    peer = ShiftWindowMSA(embed_dims, num_heads, WINDOW,
                          shift_size=WINDOW // 2)
    peer.load_state_dict({f'w_msa.{k}': v
                          for k, v in ours.state_dict().items()},
                         strict=False)
    return peer


def msa_per_stage(args, device):
    B = args.batch
    print(f'\n(a) MSA per stage, Swin-T shapes of a 224x224 input, batch {B}, '
          f'window {WINDOW}, shifted block (shift {WINDOW // 2}), inference; '
          f'median of {args.repeats}')
    rows = [label for label, _, _ in VARIANTS] + [MMDET_ROW]
    ms = {row: [] for row in rows}
    diffs = []
    for s, C, heads in STAGES:
        torch.manual_seed(0)
        x = torch.randn(B, s, s, C, device=device)
        tokens = x.view(B, s * s, C)
        fns, failed = {}, {}
        for label, kwargs, _ in VARIANTS:
            try:
                m = build_swin_attention(C, heads, WINDOW, attn_cfg=kwargs)
                m.init_weights()
                m.to(device).eval()
            except Exception as e:  # report, keep the other rows
                failed[label] = e
                continue
            fns[label] = (lambda m: lambda: m(x, WINDOW // 2))(m)
            if label == VARIANTS[0][0]:
                peer = mmdet_msa(C, heads, m).to(device).eval()
                fns[MMDET_ROW] = lambda: peer(tokens, (s, s))
                with torch.no_grad():
                    diffs.append(max_diff(
                        m(x, WINDOW // 2).view(B, s * s, C),
                        peer(tokens, (s, s))))
        with torch.no_grad():
            ok = {}
            for name, fn in fns.items():  # a crash loses one cell only
                try:
                    fn()
                    ok[name] = fn
                except Exception as e:
                    failed[name] = e
            res = bench(ok, args.repeats, device, warmup=False)
        for name, e in failed.items():
            print(f'  ! {name} at {s}x{s}: {type(e).__name__}: {e}')
        for row in rows:
            ms[row].append(res[row] * 1e3 if row in res else None)
    print('  mmdet SW-MSA vs ours (cyclic, same weights) max |diff| per '
          'stage: ' + ' '.join(f'{d:.1e}' for d in diffs))

    def table(title, values, cyclic):
        head = ''.join(f' | {"stage" + str(i + 1) + " ms":>11} {"x cyc":>6}'
                       for i in range(4))
        print(f'  {title:<33}{head}')
        for row in rows:
            cells = ''
            for i in range(4):
                v, c = values[row][i], cyclic[i]
                ratio = None if v is None or not c else v / c
                cells += f' | {fmt(v, ".2f", 11)} {fmt(ratio, ".2f", 6)}'
            print(f'  {row:<33}{cells}')

    table(f'measured ({device.type})', ms, ms[VARIANTS[0][0]])
    paper = {row: list(PAPER_MSA_MS.get(key, (None, ) * 4))
             for row, (_, _, key) in zip(rows, VARIANTS)}
    paper[MMDET_ROW] = [None] * 4
    table(PAPER_LABEL, paper, PAPER_MSA_MS['cyclic'])


# -------------------------------------------------- (b) backbone throughput
def backbone_throughput(args, device):
    B, (H, W) = args.batch, args.backbone_shape
    x = torch.randn(B, 3, H, W, device=device)
    print(f'\n(b) backbone throughput, {B}x3x{H}x{W}, inference (images/s); '
          f'median of {args.repeats}')
    print(f'  {"arch":<8} | {"ours img/s":>10} | {"mmdet img/s":>11} | '
          f'{"ours/mmdet time":>15} | {"max |out diff|":>14}')
    for arch in args.archs:
        torch.manual_seed(0)
        ours, theirs = build_pair(arch)
        ours.to(device).eval(), theirs.to(device).eval()
        with torch.no_grad():
            diff = max_diff(ours(x), theirs(x))
            res = bench({'ours': lambda: ours(x), 'mmdet': lambda: theirs(x)},
                        args.repeats, device)
        print(f'  {ARCH_NAMES.get(arch, arch):<8} | {B / res["ours"]:10.1f} | '
              f'{B / res["mmdet"]:11.1f} | {res["ours"] / res["mmdet"]:15.2f} '
              f'| {diff:14.1e}')
        ours = theirs = None  # freed before the next pair is built
        gc.collect()

    print(f'  Swin-T per attention variant ("x cyclic" = time / time of '
          f'cyclic; paper column: FPS of cyclic / FPS of the variant, '
          f'{PAPER_LABEL})')
    print(f'  {"variant":<33} | {"img/s":>8} | {"x cyclic":>8} | '
          f'{"paper FPS":>9} | {"paper x cyc":>11}')
    fns, failed = {}, {}
    for label, kwargs, _ in VARIANTS:
        try:
            torch.manual_seed(0)
            model = SwinTransformer(arch='tiny', drop_path_rate=0.,
                                    attn_cfg=kwargs)
            model.init_weights()
            model.to(device).eval()
            with torch.no_grad():
                model(x)
        except Exception as e:
            failed[label] = e
            continue
        fns[label] = (lambda m: lambda: m(x))(model)
    with torch.no_grad():
        res = bench(fns, args.repeats, device, warmup=False)
    base = res.get(VARIANTS[0][0])
    paper_base = PAPER_FPS['cyclic'][0]
    for label, _, key in VARIANTS:
        if label in failed:
            e = failed[label]
            print(f'  {label:<33} | failed: {type(e).__name__}: {e}')
            continue
        t = res[label]
        pfps = PAPER_FPS[key][0] if key else None
        print(f'  {label:<33} | {B / t:8.1f} | '
              f'{fmt(t / base if base else None, ".2f", 8)} | '
              f'{fmt(pfps, "d", 9)} | '
              f'{fmt(paper_base / pfps if pfps else None, ".2f", 11)}')
    del fns
    gc.collect()


# ------------------------------------------------------ (c) fast-path check
def proc_status_mb(field):
    """``VmRSS`` / ``VmHWM`` of this process from /proc, in MB."""
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f'no {field} in /proc/self/status')


def reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if refused."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def memory_probe(which, kind, shape, arch, device):
    """Run in a fresh subprocess: peak MB of one step of one model."""
    torch.manual_seed(0)
    zoo = SwinTransformer.arch_zoo[arch]
    if which.startswith('rswatt'):
        from mmvisattn.models.backbones import RSWAttTransformer
        sizes, attn_cfg = RSWATT_MEMORY_VARIANTS[which]
        model = RSWAttTransformer(arch=arch, drop_path_rate=0.,
                                  scale_windows=sizes, attn_cfg=attn_cfg)
        model.init_weights()
    elif which == 'ours':
        model = SwinTransformer(arch=arch, drop_path_rate=0.)
        model.init_weights()
    else:
        from mmdet.models.backbones import SwinTransformer as MMDetSwin
        model = MMDetSwin(embed_dims=zoo['embed_dims'], depths=zoo['depths'],
                          num_heads=zoo['num_heads'], drop_path_rate=0.)
    model.to(device).train(kind == 'train')
    x = torch.randn(1, 3, *shape, device=device)

    def step():
        if kind == 'train':
            sum(o.mean() for o in model(x)).backward()
        else:
            with torch.no_grad():
                model(x)

    # Steady state, as in a training run or a served model: one warm-up
    # step first, so one-time allocations (gradient buffers, our prepacked
    # oneDNN weights, allocator arenas) are not counted as the step's peak.
    step()
    model.zero_grad(set_to_none=False)
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize(device)
        peak = (torch.cuda.max_memory_allocated(device) - base) / 2**20
        exact = True
    else:
        # Not ru_maxrss: Linux carries the parent's resident size into it
        # across fork + exec, so a child's ru_maxrss starts at the size of
        # this (big) benchmark process. VmHWM belongs to the new image.
        reset = reset_peak_rss()
        base, high_before = proc_status_mb('VmRSS'), proc_status_mb('VmHWM')
        step()
        high_after = proc_status_mb('VmHWM')
        peak, exact = high_after - base, reset or high_after > high_before
    print(json.dumps(dict(peak_mb=peak, exact=exact)))


# the RSWAtt-T backbone's layer variants measured by --large (name ->
# window sizes, attn_cfg): ours, and the source's forms
RSWATT_MEMORY_VARIANTS = {
    'rswatt': ((5, 9), None),
    'rswatt-fixed': ((5, 9), dict(window_predictor=None)),
    'rswatt-concat-4-8-16': ((4, 8, 16),
                             dict(fusion=dict(type='ConcatFusion'))),
    'rswatt-offsets': ((5, 9),
                       dict(window_predictor=dict(type='OffsetExtents'))),
    'rswatt-enhanced-anchors': ((5, 9), dict(
        window_predictor=dict(type='EnhancedAnchorExtents'))),
}


def probe_memory(which, kind, shape, arch, device):
    cmd = [sys.executable, os.path.abspath(__file__), '--memory-probe', which,
           kind, str(shape[0]), str(shape[1]), '--archs', arch,
           '--device', device.type]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f'memory probe {which} {kind} failed:\n'
                           f'{out.stderr[-2000:]}')
    return json.loads(out.stdout.strip().splitlines()[-1])


def fast_path(args, device):
    arch = args.archs[0]
    name = ARCH_NAMES.get(arch, arch)
    (ih, iw), (th, tw) = args.infer_shape, args.train_shape
    print(f'\n(c) fast-path check, {name}, ours vs mmdet (same weights); '
          f'median of {args.heavy_repeats}; memory: one step in a fresh '
          'subprocess each')
    torch.manual_seed(0)
    ours, theirs = build_pair(arch)
    ours.to(device), theirs.to(device)
    x = torch.randn(1, 3, ih, iw, device=device)
    y = torch.randn(1, 3, th, tw, device=device)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        diff = max_diff(ours(x), theirs(x))
        inf = bench({'ours': lambda: ours(x), 'mmdet': lambda: theirs(x)},
                    args.heavy_repeats, device)

    def step(model):
        def run():
            model.zero_grad(set_to_none=True)
            sum(o.mean() for o in model(y)).backward()
        return run

    ours.train(), theirs.train()
    tr = bench({'ours': step(ours), 'mmdet': step(theirs)},
               args.heavy_repeats, device)
    ours = theirs = x = y = None  # freed before the next section
    gc.collect()

    def mem(kind, shape):
        a = probe_memory('ours', kind, shape, arch, device)
        b = probe_memory('mmdet', kind, shape, arch, device)
        mark = '' if a['exact'] and b['exact'] else ' (>=)'
        return (f'peak memory ours {a["peak_mb"]:.0f} MB, mmdet '
                f'{b["peak_mb"]:.0f} MB{mark}, peak memory ratio '
                f'{a["peak_mb"] / max(b["peak_mb"], 1e-9):.2f} '
                '(target <= 1.0)')

    print(f'  max |output difference| at 1x3x{ih}x{iw}: {diff:.1e}')
    print(f'  inference {ih}x{iw}: ours {inf["ours"]:.3f}s mmdet '
          f'{inf["mmdet"]:.3f}s, ours/mmdet time ratio '
          f'{inf["ours"] / inf["mmdet"]:.2f} (target <= 0.67)')
    print(f'    {mem("infer", (ih, iw))}')
    print(f'  train {th}x{tw}: ours {tr["ours"]:.3f}s mmdet '
          f'{tr["mmdet"]:.3f}s, ours/mmdet time ratio '
          f'{tr["ours"] / tr["mmdet"]:.2f} (target <= 0.8)')
    print(f'    {mem("train", (th, tw))}')


# ------------------------------------------------------------- scaling mode
def fit_exponent(pixels, seconds):
    """b of log(t) = a + b log(pixels), least squares (None if < 2 points)."""
    if len(pixels) < 2:
        return None
    xs, ys = [math.log(p) for p in pixels], [math.log(t) for t in seconds]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum(
        (x - mx)**2 for x in xs)


def scaling(args, device):
    C, heads = STAGES[0][1], STAGES[0][2]
    from mmvisattn.models.layers import ReconstructedWindowAttention

    def swin(**kwargs):
        return (lambda: build_swin_attention(C, heads, WINDOW, **kwargs),
                lambda m, x: m(x, WINDOW // 2))

    def rswatt(*sizes):
        return (lambda: ReconstructedWindowAttention(C, heads, sizes),
                lambda m, x: m(x))

    rows = (('window (cyclic, shifted)', swin()),
            ('sliding window (blocked)', swin(type='HaloSlidingWindowAttention')),
            ('RSWAtt, largest window 7', rswatt(7)),
            ('RSWAtt, windows 5 + 9', rswatt(5, 9)),
            ('global MSA (SDPA)', swin(type='GlobalAttention')))
    print(f'\nscaling: one stage-1 MSA layer (C={C}, {heads} heads, window '
          f'{WINDOW}, (s/4)^2 tokens), batch {args.batch}, inference; '
          f'median of {args.repeats} ({args.heavy_repeats} where a warm-up '
          'took > 1 s)')
    ms = {label: {} for label, _ in rows}
    dropped = {}
    notes = []
    for s in args.sizes:
        n = s // 4
        torch.manual_seed(0)
        x = torch.randn(args.batch, n, n, C, device=device)
        fns, reps = {}, {}
        for label, (build, call) in rows:
            if label in dropped:
                continue
            done = ms[label]
            if done and 'global' in label:
                last = max(done)
                guess = done[last] / 1e3 * (s / last)**4
                if guess > 2 * args.global_limit:
                    dropped[label] = s
                    notes.append(f'{label}: {s}^2 and larger dropped '
                                 f'(predicted {guess:.0f} s per run from '
                                 f'{last}^2 and time ~ pixels^2)')
                    continue
            m = build()
            m.init_weights()
            m.to(device).eval()
            fn = (lambda m, call: lambda: call(m, x))(m, call)
            with torch.no_grad():
                warm = timed(fn, device)
            if 'global' in label and warm > args.global_limit:
                dropped[label] = s
                notes.append(f'{label}: {s}^2 and larger dropped (one run '
                             f'took {warm:.1f} s > {args.global_limit:g} s)')
                continue
            fns[label] = fn
            reps[label] = args.heavy_repeats if warm > 1 else args.repeats
        with torch.no_grad():
            res = bench(fns, reps, device, warmup=False)
        for label, t in res.items():
            ms[label][s] = t * 1e3
        del fns
        gc.collect()

    head = ''.join(f' | {str(s) + "^2 ms":>10}' for s in args.sizes)
    print(f'  {"variant":<26}{head} | {"exponent b":>10}')
    print(f'  {"(tokens)":<26}'
          + ''.join(f' | {(s // 4)**2:>10}' for s in args.sizes)
          + f' | {"":>10}')
    for label, _ in rows:
        done = ms[label]
        cells = ''.join(f' | {fmt(done.get(s), ".1f", 10)}'
                        for s in args.sizes)
        b = fit_exponent([s * s for s in done], [t for t in done.values()])
        print(f'  {label:<26}{cells} | {fmt(b, ".2f", 10)}')
    print('  (b: time ~ pixels^b; expected ~1 for windows, ~2 for global)')
    for note in notes:
        print(f'  note: {note}')
    if args.large:
        large_image(args, device)


def large_image(args, device):
    """RSWAtt-T backbone inference on a large image and at 1/2 and 3/4 of
    its side (each in a fresh process, steady-state peak memory), with the
    fitted memory exponent, against what one global-attention layer of
    stage 1 would need for its logits alone."""
    h, w = args.large
    shapes = [(h * k // 4, w * k // 4) for k in (2, 3, 4)]
    probes = [probe_memory('rswatt', 'infer', s, 'tiny', device)
              for s in shapes]
    probe = probes[-1]
    b_mem = fit_exponent([a * b for a, b in shapes],
                         [p['peak_mb'] for p in probes])
    tokens = (h // 4) * (w // 4)
    heads = STAGES[0][2]
    global_gb = tokens**2 * heads * 4 / 2**30
    with open('/proc/meminfo') as f:
        ram_gb = int(next(line for line in f
                          if line.startswith('MemTotal')).split()[1]) / 2**20
    mark = '' if probe['exact'] else ' (>=)'
    if args.large_variants:
        print('\nlarge image, RSWAtt-T backbone per layer variant, '
              'inference, peak memory (fresh process each):')
        for which in RSWATT_MEMORY_VARIANTS:
            if which == 'rswatt':
                found = probes
            else:
                found = [probe_memory(which, 'infer', s, 'tiny', device)
                         for s in shapes]
            b = fit_exponent([a * c for a, c in shapes],
                             [p['peak_mb'] for p in found])
            marks = ['' if p['exact'] else ' (>=)' for p in found]
            print(f'  {which:<26}' + ', '.join(
                f'{a}x{c}: {p["peak_mb"]:.0f} MB{m}'
                for (a, c), p, m in zip(shapes, found, marks))
                + f'; memory ~ pixels^{b:.2f}')
    print(f'\nlarge image: RSWAtt-T backbone, 1x3x{h}x{w}, inference: peak '
          f'{probe["peak_mb"]:.0f} MB{mark}; one global-attention layer at '
          f'stage 1 ({tokens} tokens, {heads} heads) needs {global_gb:.1f} '
          f'GB for its fp32 logits alone; this machine has {ram_gb:.1f} GB'
          '\n  peak memory ' + ', '.join(
              f'{a}x{b}: {p["peak_mb"]:.0f} MB'
              for (a, b), p in zip(shapes, probes))
          + f'; fitted memory ~ pixels^{b_mem:.2f} (CPU allocator caching '
          'makes single peaks noisy by tens of percent)')


# --------------------------------------------------------------------- main
def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument('--mode', default='all',
                        choices=('table', 'scaling', 'memory', 'all'))
    parser.add_argument('--device', choices=('cpu', 'cuda'), default=None,
                        help='default: cuda if available, else cpu')
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--heavy-repeats', type=int, default=5)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--batch', type=int, default=1,
                        help='batch of (a), (b) and scaling (paper: 64)')
    parser.add_argument('--backbone-shape', type=int, nargs=2,
                        default=(224, 224))
    parser.add_argument('--archs', nargs='+',
                        default=['tiny', 'small', 'base'],
                        choices=list(SwinTransformer.arch_zoo),
                        help='archs of (b); the first one is used in (c)')
    parser.add_argument('--infer-shape', type=int, nargs=2,
                        default=(800, 1216))
    parser.add_argument('--train-shape', type=int, nargs=2,
                        default=(512, 512))
    parser.add_argument('--sizes', type=int, nargs='+',
                        default=[256, 384, 512, 640, 768])
    parser.add_argument('--large', type=int, nargs=2, metavar=('H', 'W'),
                        default=None,
                        help='scaling mode: also run the RSWAtt-T backbone '
                        'on one HxW image (e.g. 1024 1024) and compare its '
                        'peak memory with global attention\'s logits')
    parser.add_argument('--large-variants', action='store_true',
                        help='with --large: the same memory probes for '
                        'each RSWAtt layer variant (fixed windows, concat '
                        'fusion 4/8/16, offset predictor, enhanced anchors)')
    parser.add_argument('--global-limit', type=float, default=20.,
                        help='seconds; slower global runs are dropped')
    parser.add_argument('--threads', type=int, default=None,
                        help='torch.set_num_threads (default: torch\'s)')
    parser.add_argument('--memory-probe', nargs=4, default=None,
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = args.heavy_repeats = 1
        args.archs = args.archs[:1] if '--archs' in sys.argv else ['tiny']
        args.sizes = [224, 320, 448]
        args.infer_shape, args.train_shape = (320, 320), (224, 224)
    args.sizes = sorted(args.sizes)
    args.repeats, args.heavy_repeats = max(1, args.repeats), max(
        1, args.heavy_repeats)
    return args


def main():
    args = parse_args()
    # mmengine logs every parameter's init at INFO level: keep it quiet.
    MMLogger.get_instance('benchmark_attention', log_level='WARNING')
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device or (
        'cuda' if torch.cuda.is_available() else 'cpu'))
    if args.memory_probe:
        which, kind, h, w = args.memory_probe
        memory_probe(which, kind, (int(h), int(w)), args.archs[0], device)
        return
    import mmdet
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' \
        else 'cpu'
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    print(f'torch {torch.__version__}, device {device.type} ({name}), '
          f'{torch.get_num_threads()} threads, mmdet {mmdet.__version__}, '
          f'mode {args.mode}, repeats {args.repeats}/{args.heavy_repeats}'
          f'{", quick" if args.quick else ""}; load average {load:.1f} on '
          f'{os.cpu_count()} cpus')
    start = time.perf_counter()
    if args.mode in ('table', 'all'):
        msa_per_stage(args, device)
        backbone_throughput(args, device)
        fast_path(args, device)
    if args.mode in ('scaling', 'all'):
        scaling(args, device)
    if args.mode == 'memory':  # the --large probes alone
        if not args.large:
            raise SystemExit('--mode memory needs --large H W')
        large_image(args, device)
    print(f'\ntotal wall time {time.perf_counter() - start:.0f} s; read the '
          'ratios, not the seconds')


if __name__ == '__main__':
    main()
