"""Swin backbone speed: mmvisattn vs. mmdet 3.3.0's SwinTransformer, one run.

    python tools/analysis_tools/benchmark_backbone.py [--arch tiny]
        [--infer-shape 800 1216] [--train-shape 512 512] [--repeats 5]
        [--device cpu|cuda] [--infer-batch 1] [--train-batch 1]
        [--amp-dtype bfloat16|float16] [--compile [--compile-backend B]]
        [--ablate]

Both models carry the same weights (mapped with mmdet's own converter) and
their outputs are compared first. Timings alternate between the two models
and report medians; only the ratios are meant to be read (this machine is
noisy). Ratio < 1 means mmvisattn is faster.

``--amp-dtype`` adds rows for both models under autocast in that dtype,
each against mmdet in fp32, and prints the GEMM rate (1024^3) in fp32 and
in that dtype measured in the same run, so a kernel's speed-up can be read
against what the hardware gives. On CUDA each row also prints
``torch.cuda.max_memory_allocated``.

``--compile`` adds inference rows for both models compiled by
``torch.compile`` (inductor, with its ``freezing`` pass: the weights become
constants of the graph, packed once, so a compiled model must be compiled
again after its weights change), in the ``--amp-dtype`` dtype or fp32:
ours compiled against mmdet in eager fp32, and against mmdet compiled the
same way. Each model's first call (the compilation) is timed and printed.
``--compile-backend`` names another ``torch.compile`` backend (the tests
run this path with ``eager``: dynamo's capture without inductor's C++
compilation).

``--ablate`` adds, for each part of our fast inference path
(``mmvisattn.ops.FAST_PARTS``: packed linears, chunked window attention,
chunked MLP with the residual added per chunk, the GELU fused into fc1),
an inference row of ours with
that part switched off (``use_backend('auto', without=(part, ))``) against
ours with every part on, and one with the whole fast path off
(``use_backend('plain')``), alternated in the same run: a ratio above 1 is
what the part saves (under ``--amp-dtype``, in that dtype).
"""
import argparse
import statistics
import time

import torch

import mmvisattn  # noqa: F401
from mmvisattn.analysis.benchmark import build_pair
from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.ops import FAST_PARTS, use_backend

DEVICE = 'cpu'


def sync():
    if DEVICE == 'cuda':
        torch.cuda.synchronize()


def timed(fn):
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def peak_memory(fn):
    """Peak CUDA memory of one call, in GiB (None on the CPU)."""
    if DEVICE != 'cuda':
        return None
    torch.cuda.reset_peak_memory_stats()
    fn()
    sync()
    return torch.cuda.max_memory_allocated() / 2**30


def gemm_rate(dtype, n=1024, repeats=5):
    a = torch.randn(n, n, device=DEVICE).to(dtype)
    b = torch.randn(n, n, device=DEVICE).to(dtype)
    a @ b
    best = min(timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def compare(name, ours_fn, theirs_fn, repeats, labels=('mmvisattn', 'mmdet')):
    ours_fn(), theirs_fn()  # warm-up once (allocator, caches)
    ours_t, theirs_t = [], []
    for _ in range(repeats):  # alternate so drift hits both alike
        ours_t.append(timed(ours_fn))
        theirs_t.append(timed(theirs_fn))
    a, b = statistics.median(ours_t), statistics.median(theirs_t)
    memory = ''
    if DEVICE == 'cuda':
        memory = (f'  peak GiB {peak_memory(ours_fn):6.2f} / '
                  f'{peak_memory(theirs_fn):6.2f}')
    first, second = labels
    print(f'{name:<52} {first} {a:8.3f}s  {second} {b:8.3f}s  '
          f'ratio {first}/{second} {a / b:5.2f}{memory}', flush=True)
    return a / b


def compiled_rows(ours, theirs, infer, shape, amp, args):
    """Inference of both models compiled by inductor with frozen weights
    (the deployment setting), in ``amp`` (or fp32): ours against mmdet in
    eager fp32 and against mmdet compiled the same way."""
    import torch._inductor.config as inductor_config

    # frozen weights: inductor folds them into the graph and packs them for
    # its GEMMs once (inference graphs only: eval, no_grad)
    inductor_config.freezing = True
    dtype = args.amp_dtype or 'float32'
    compiled = {}
    for label, model in (('mmvisattn', ours), ('mmdet', theirs)):
        compiled[label] = torch.compile(model, backend=args.compile_backend)
        seconds = timed(infer(compiled[label], amp))
        print(f'compiled {label} ({dtype}, {args.compile_backend}): first '
              f'call (compilation) {seconds:.1f}s', flush=True)
    name = f'inference {"x".join(map(str, shape))} compiled'
    compare(f'{name} ours {dtype} vs mmdet fp32 eager',
            infer(compiled['mmvisattn'], amp), infer(theirs), args.repeats)
    compare(f'{name} ours vs mmdet, both {dtype} compiled',
            infer(compiled['mmvisattn'], amp), infer(compiled['mmdet'], amp),
            args.repeats)


def ablate_rows(ours, infer, shape, amp, args):
    """Ours with one part of the fast path off (then all of it) against
    ours with every part on, in ``amp`` (or fp32)."""
    def under(name, without=()):
        run = infer(ours, amp)

        def call():
            with use_backend(name, without):
                run()
        return call

    dtype = args.amp_dtype or 'fp32'
    name = f'inference {"x".join(map(str, shape))} {dtype}'
    for part in FAST_PARTS:
        compare(f'{name} without {part}', under('auto', (part, )),
                under('auto'), args.repeats, labels=(f'-{part}', 'ours'))
    compare(f'{name} plain path', under('plain'), under('auto'),
            args.repeats, labels=('plain', 'ours'))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--arch', default='tiny',
                        choices=list(SwinTransformer.arch_zoo))
    parser.add_argument('--infer-shape', type=int, nargs=2,
                        default=(800, 1216))
    parser.add_argument('--train-shape', type=int, nargs=2,
                        default=(512, 512))
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
    parser.add_argument('--infer-batch', type=int, default=1)
    parser.add_argument('--train-batch', type=int, default=1)
    parser.add_argument('--amp-dtype', choices=('bfloat16', 'float16'),
                        help='also time both models under autocast')
    parser.add_argument('--compile', action='store_true',
                        help='also time inference of both models compiled '
                        'by torch.compile (inductor, frozen weights)')
    parser.add_argument('--compile-backend', default='inductor',
                        help='torch.compile backend for --compile')
    parser.add_argument('--ablate', action='store_true',
                        help='also time our inference with each fast-path '
                        'part switched off, against all parts on')
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    torch.manual_seed(0)
    ours, theirs = build_pair(args.arch)
    ours, theirs = ours.to(DEVICE), theirs.to(DEVICE)
    print(f'torch {torch.__version__}, {torch.get_num_threads()} threads, '
          f'Swin-{args.arch[0].upper()}, {DEVICE}'
          + (f' ({torch.cuda.get_device_name()})' if DEVICE == 'cuda'
             else f' (CPU capability {torch.backends.cpu.get_cpu_capability()})'))
    amp = getattr(torch, args.amp_dtype) if args.amp_dtype else None
    if amp is not None:
        from mmvisattn.engine.amp import cpu_has_native_bf16
        fp32, low = gemm_rate(torch.float32), gemm_rate(amp)
        native = '' if DEVICE == 'cuda' else \
            f', native bf16 instructions: {cpu_has_native_bf16()}'
        print(f'GEMM 1024^3: fp32 {fp32:8.1f} GFLOP/s, {args.amp_dtype} '
              f'{low:8.1f} GFLOP/s ({low / fp32:.2f}x){native}')

    def autocast(dtype):
        return torch.autocast(DEVICE, dtype=dtype, enabled=dtype is not None)

    x = torch.randn(args.infer_batch, 3, *args.infer_shape, device=DEVICE)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        diff = max((a - b).abs().max().item()
                   for a, b in zip(ours(x), theirs(x)))
    print(f'max |output difference| at {tuple(x.shape)}: {diff:.2e}')

    def infer(model, dtype=None):
        def run():
            with torch.no_grad(), autocast(dtype):
                model(x)
        return run

    def rows(kind, make, shape):
        """fp32 ours vs mmdet, then (with --amp-dtype) each model under
        autocast against mmdet in fp32."""
        name = f'{kind} {"x".join(map(str, shape))}'
        compare(f'{name} fp32', make(ours), make(theirs), args.repeats)
        if amp is not None:
            compare(f'{name} ours {args.amp_dtype} vs mmdet fp32',
                    make(ours, amp), make(theirs), args.repeats)
            compare(f'{name} mmdet {args.amp_dtype} vs mmdet fp32',
                    make(theirs, amp), make(theirs), args.repeats,
                    labels=(f'mmdet-{args.amp_dtype}', 'mmdet'))

    rows('inference', infer, x.shape)
    if args.ablate:
        ablate_rows(ours, infer, x.shape, amp, args)
    if args.compile:
        compiled_rows(ours, theirs, infer, x.shape, amp, args)

    y = torch.randn(args.train_batch, 3, *args.train_shape, device=DEVICE)
    ours.train(), theirs.train()

    def step(model, dtype=None):
        def run():
            model.zero_grad(set_to_none=True)
            with autocast(dtype):
                loss = sum(o.float().mean() for o in model(y))
            loss.backward()
        return run

    rows('train step', step, y.shape)


if __name__ == '__main__':
    main()
