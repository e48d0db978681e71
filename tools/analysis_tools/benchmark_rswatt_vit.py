"""RSWAttViT against a ViT of the same size with global attention, as the
RSWAtt source's benchmark reports them: parameters, FLOPs and the latency
of 100 forward passes (batch 1, 224x224, inference), both models measured
in the same run.

    python tools/analysis_tools/benchmark_rswatt_vit.py [--runs 100]
        [--rounds 3] [--arch base-6] [--size 224] [--device cpu|cuda]

The peer is mmpretrain's ``VisionTransformer`` with the same width, depth,
heads, MLP ratio, patch size and class token (global multi-head
self-attention through ``scaled_dot_product_attention``). The two run in
alternation for ``--rounds`` rounds of ``--runs`` passes each (after one
warm-up round); the table gives the median round of each and the ratio
RSWAttViT / ViT per round and its median: read the ratios, not the
milliseconds, on a noisy machine. FLOPs: fvcore's convention (every
matmul counted, attention included; ``mmvisattn.analysis.complexity.get_complexity``).
"""
import argparse
import statistics
import time

import torch
from mmengine.logging import MMLogger

import mmvisattn  # noqa: F401
from mmvisattn.analysis.complexity import get_complexity
from mmvisattn.models.backbones import RSWAttViT


def build_models(arch: str, size: int):
    from mmpretrain.models.backbones import VisionTransformer
    spec = RSWAttViT.arch_zoo[arch]
    ours = RSWAttViT(arch, img_size=size)
    ours.init_weights()
    peer = VisionTransformer(
        arch=dict(embed_dims=spec['embed_dims'], num_layers=spec['depth'],
                  num_heads=spec['num_heads'],
                  feedforward_channels=4 * spec['embed_dims']),
        img_size=size, patch_size=16, out_type='cls_token')
    peer.init_weights()
    ours.eval()
    peer.eval()  # (mmpretrain's train() returns None: no chaining)
    return {f'RSWAttViT {arch}': ours,
            'mmpretrain ViT, same size, global attention (peer)': peer}


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed_round(model, x, runs, device):
    sync(device)
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(runs):
            model(x)
    sync(device)
    return (time.perf_counter() - start) * 1e3 / runs  # ms per pass


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--arch', default='base-6',
                        choices=list(RSWAttViT.arch_zoo))
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--runs', type=int, default=100)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--device', choices=('cpu', 'cuda'), default=None)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    MMLogger.get_instance('benchmark_rswatt_vit', log_level='WARNING')
    device = torch.device(args.device or (
        'cuda' if torch.cuda.is_available() else 'cpu'))
    models = build_models(args.arch, args.size)
    counts = {name: get_complexity(m, (3, args.size, args.size))
              for name, m in models.items()}
    x = torch.randn(1, 3, args.size, args.size, device=device)
    for m in models.values():
        m.to(device)
        timed_round(m, x, max(1, args.runs // 10), device)  # warm-up
    times = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, m in models.items():
            times[name].append(timed_round(m, x, args.runs, device))
    ours, peer = list(models)
    ratios = [a / b for a, b in zip(times[ours], times[peer])]
    print(f'\n{args.runs} forward passes per round, batch 1, '
          f'{args.size}x{args.size}, {device.type}, {args.rounds} rounds')
    print('| model | params | FLOPs | latency (median round, ms) |')
    print('|---|---|---|---|')
    for name in models:
        c = counts[name]
        print(f'| {name} | {c["params"] / 1e6:.1f}M | '
              f'{c["flops"] / 1e9:.2f}G | '
              f'{statistics.median(times[name]):.1f} |')
    print('latency ratio RSWAttViT / ViT per round: '
          + ', '.join(f'{r:.2f}' for r in ratios)
          + f'; median {statistics.median(ratios):.2f}')
    print(f'FLOPs ratio: {counts[ours]["flops"] / counts[peer]["flops"]:.2f}'
          f'; params ratio: '
          f'{counts[ours]["params"] / counts[peer]["params"]:.2f}')


if __name__ == '__main__':
    main()
