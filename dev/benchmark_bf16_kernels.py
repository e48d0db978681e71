"""The CPU kernels of the inference fast path against what they replace,
on Swin-T's shapes, three runs in one process:

    python dev/benchmark_bf16_kernels.py [--threads 2] \
        [--runs 3] [--only linear packing attention]

* linears: a weight packed once as bf16 for oneDNN (``ops.linear``, what
  the fast path runs under bf16 autocast) against autocast's ``F.linear``
  on an fp32 weight (cast and reordered per call), input bf16;
* window attention, 83 windows of 49 tokens, head dim 32: ``ops.attend``'s
  spelled-out bf16 form against torch's fused ``scaled_dot_product_
  attention`` in bf16 and in fp32, with an additive mask;
* packing: one linear call that packs its weight first (what a linear
  called once per block pays) against ``F.linear``, fp32 and under bf16
  autocast, at the row counts around ``ops.linear._MIN_PACK_ROWS``.
Prints milliseconds (median of 30 calls) and ratios (ours / peer).
docs/benchmarks.md quotes its output.
"""
import argparse

import torch
import torch.nn.functional as F

from mmvisattn.analysis.benchmark import median_ms


def timed(fn):
    return median_ms(fn, iters=30, warmup=5)


def linears():
    rows = []
    for n, cin, cout in [(4096, 96, 288), (4096, 96, 384), (4096, 384, 96),
                         (4096, 192, 768), (4096, 768, 192),
                         (1024, 384, 1536), (1024, 1536, 384)]:
        linear = torch.nn.Linear(cin, cout)
        x = torch.randn(n, cin).bfloat16()
        packed = torch.ops.mkldnn._reorder_linear_weight(
            linear.weight.detach().bfloat16(), n)
        bias = linear.bias.detach().bfloat16()
        with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
            peer = timed(lambda: linear(x))
            ours = timed(lambda: torch.ops.mkldnn._linear_pointwise(
                x, packed, bias, 'none', [], ''))
        rows.append((f'linear {n}x{cin}->{cout}', ours, peer))
    return rows


def packing():
    from mmvisattn.ops.linear import ROWS_HINT, pack_weight
    rows = []
    for n, cin, cout in [(256, 768, 3072), (512, 768, 3072),
                         (950, 768, 3072), (950, 3072, 768),
                         (2048, 192, 576), (3800, 384, 1152),
                         (3800, 1536, 384)]:
        linear = torch.nn.Linear(cin, cout).eval()
        x = torch.randn(n, cin)
        for dtype in (torch.float32, torch.bfloat16):
            def packed_once():
                # packed as the fast path packs it (ops.linear)
                w = pack_weight(linear.weight.detach().to(dtype), ROWS_HINT)
                return torch.ops.mkldnn._linear_pointwise(
                    x.to(dtype), w, linear.bias.detach().to(dtype), 'none',
                    [], '')

            with torch.no_grad(), torch.autocast(
                    'cpu', dtype=torch.bfloat16,
                    enabled=dtype == torch.bfloat16):
                peer = timed(lambda: linear(x))
                ours = timed(packed_once)
            name = 'fp32' if dtype == torch.float32 else 'bf16'
            rows.append((f'pack + linear {n}x{cin}->{cout} {name} '
                         '(F.linear)', ours, peer))
    return rows


def attention():
    from mmvisattn.ops.attention import attend
    rows = []
    for heads in (3, 6, 12):
        q, k, v = (torch.randn(83, heads, 49, 32) for _ in range(3))
        mask = 0.02 * torch.randn(83, heads, 49, 49)
        qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()
        with torch.no_grad():
            ours = timed(lambda: attend(qb, kb, vb, attn_mask=mask))
            sdpa16 = timed(lambda: F.scaled_dot_product_attention(
                qb, kb, vb, attn_mask=mask.bfloat16()))
            sdpa32 = timed(lambda: F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask))
        rows.append((f'attention 83x{heads}x49x32 (SDPA bf16)', ours,
                     sdpa16))
        rows.append((f'attention 83x{heads}x49x32 (SDPA fp32)', ours,
                     sdpa32))
    return rows


GROUPS = {'linear': linears, 'packing': packing, 'attention': attention}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--only', nargs='+', default=list(GROUPS),
                        choices=list(GROUPS), help='kernel groups to time')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f'torch {torch.__version__}, {args.threads} threads, CPU '
          f'capability {torch.backends.cpu.get_cpu_capability()}, oneDNN '
          f'bf16: {torch.ops.mkldnn._is_mkldnn_bf16_supported()}')
    results = {}
    for run in range(args.runs):
        for group in args.only:
            for name, ours, peer in GROUPS[group]():
                results.setdefault(name, []).append((ours, peer))
    print('\n| kernel (peer) | ours ms (runs) | peer ms (runs) | ours / peer '
          '(runs) |')
    print('|---|---|---|---|')
    for name, values in results.items():
        print(f'| {name} | {", ".join(f"{o:.2f}" for o, _ in values)} | '
              f'{", ".join(f"{p:.2f}" for _, p in values)} | '
              f'{", ".join(f"{o / p:.2f}" for o, p in values)} |')


if __name__ == '__main__':
    main()
