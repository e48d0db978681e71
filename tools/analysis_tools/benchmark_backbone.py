"""Swin backbone speed: mmvisattn vs. mmdet 3.3.0's SwinTransformer, one run.

    python tools/analysis_tools/benchmark_backbone.py [--arch tiny]
        [--infer-shape 800 1216] [--train-shape 512 512] [--repeats 5]

Both models carry the same weights (mapped with mmdet's own converter) and
their outputs are compared first. Timings alternate between the two models
and report medians; only the ratios are meant to be read (this machine is
noisy). Ratio < 1 means mmvisattn is faster.
"""
import argparse
import statistics
import time

import torch

import mmvisattn  # noqa: F401
from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.models.utils import swin_to_mmdet


def build_pair(arch):
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    zoo = SwinTransformer.arch_zoo[arch]
    ours = SwinTransformer(arch=arch, drop_path_rate=0.)
    ours.init_weights()
    theirs = MMDetSwin(embed_dims=zoo['embed_dims'], depths=zoo['depths'],
                       num_heads=zoo['num_heads'], drop_path_rate=0.)
    theirs.load_state_dict(swin_to_mmdet(ours.state_dict()), strict=False)
    return ours, theirs


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(name, ours_fn, theirs_fn, repeats):
    ours_fn(), theirs_fn()  # warm-up once (allocator, caches)
    ours_t, theirs_t = [], []
    for _ in range(repeats):  # alternate so drift hits both alike
        ours_t.append(timed(ours_fn))
        theirs_t.append(timed(theirs_fn))
    a, b = statistics.median(ours_t), statistics.median(theirs_t)
    print(f'{name:<38} mmvisattn {a:8.3f}s  mmdet {b:8.3f}s  '
          f'ratio mmvisattn/mmdet {a / b:5.2f}')
    return a / b


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--arch', default='tiny',
                        choices=list(SwinTransformer.arch_zoo))
    parser.add_argument('--infer-shape', type=int, nargs=2,
                        default=(800, 1216))
    parser.add_argument('--train-shape', type=int, nargs=2,
                        default=(512, 512))
    parser.add_argument('--repeats', type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    ours, theirs = build_pair(args.arch)
    print(f'torch {torch.__version__}, {torch.get_num_threads()} threads, '
          f'Swin-{args.arch[0].upper()}')

    x = torch.randn(1, 3, *args.infer_shape)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        diff = max((a - b).abs().max().item()
                   for a, b in zip(ours(x), theirs(x)))
    print(f'max |output difference| at {tuple(x.shape)}: {diff:.2e}')

    def infer(model):
        def run():
            with torch.no_grad():
                model(x)
        return run

    compare(f'inference 1x3x{args.infer_shape[0]}x{args.infer_shape[1]}',
            infer(ours), infer(theirs), args.repeats)

    y = torch.randn(1, 3, *args.train_shape)
    ours.train(), theirs.train()

    def step(model):
        def run():
            model.zero_grad(set_to_none=True)
            sum(o.mean() for o in model(y)).backward()
        return run

    compare(f'train step 1x3x{args.train_shape[0]}x{args.train_shape[1]}',
            step(ours), step(theirs), args.repeats)


if __name__ == '__main__':
    main()
