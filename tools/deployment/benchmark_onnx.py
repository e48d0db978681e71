"""CPU latency of exported backbones under onnxruntime beside PyTorch eager
(fp32, batch 1, the same threads), three runs in one process.

    python tools/deployment/benchmark_onnx.py [--size 224] [--threads 2] \\
        [--iters 20] [--runs 3] [--models swin-t rswatt-t tnt-s rswattvit-t]

Each model is exported once with the TorchScript exporter at the given size
(static), checked against eager (max difference printed), then each run
times PyTorch (eval, no_grad: the path a user's inference takes) and the
onnxruntime session alternately, median of ``--iters`` calls after 3 warm-up
calls each, and prints onnxruntime / PyTorch. docs/deployment.md quotes its
output.
"""
import argparse
import io
import sys
import warnings

import numpy as np
import torch

from mmvisattn.analysis.benchmark import median_ms

MODELS = {
    'swin-t': dict(type='SwinTransformer'),
    'rswatt-t': dict(type='RSWAttTransformer', arch='tiny'),
    'tnt-s': dict(type='TNT', arch='small', out_type='pyramid'),
    'rswattvit-t': dict(type='RSWAttViT', arch='tiny'),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', nargs='+', default=list(MODELS),
                        choices=list(MODELS))
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--iters', type=int, default=20)
    parser.add_argument('--runs', type=int, default=3)
    return parser.parse_args(argv)


def main(argv=None):
    import onnxruntime as ort

    import mmvisattn  # noqa: F401
    from mmvisattn.registry import MODELS as REGISTRY
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    print(f'torch {torch.__version__}, onnxruntime {ort.__version__}, '
          f'{args.threads} threads, 1x3x{args.size}x{args.size} fp32, median '
          f'of {args.iters} calls, {args.runs} runs')
    rows = []
    for name in args.models:
        torch.manual_seed(0)
        model = REGISTRY.build(MODELS[name])
        model.init_weights()
        model.eval()
        x = torch.randn(1, 3, args.size, args.size)
        f = io.BytesIO()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter('ignore')
            torch.onnx.export(model, (x, ), f, opset_version=17,
                              dynamo=False, input_names=['images'])
            reference = model(x)
        reference = (reference, ) if torch.is_tensor(reference) else \
            reference
        session = ort.InferenceSession(f.getvalue(), options,
                                       providers=['CPUExecutionProvider'])
        feed = {'images': x.numpy()}
        outputs = session.run(None, feed)
        diff = max(float(np.abs(o - r.numpy()).max())
                   for o, r in zip(outputs, reference))

        def eager():
            with torch.no_grad():
                model(x)

        ratios, pairs = [], []
        for _ in range(args.runs):
            t_torch = median_ms(eager, args.iters, warmup=3)
            t_ort = median_ms(lambda: session.run(None, feed), args.iters,
                              warmup=3)
            ratios.append(t_ort / t_torch)
            pairs.append(f'{t_torch:.1f}/{t_ort:.1f}')
        rows.append((name, diff, pairs, ratios))
        print(f'{name}: max |onnx - eager| {diff:.1e}; PyTorch/onnxruntime '
              f'ms per run {", ".join(pairs)}; onnxruntime / PyTorch '
              f'{", ".join(f"{r:.2f}" for r in ratios)}', flush=True)
    print('\n| model | max diff | PyTorch ms (runs) | onnxruntime ms (runs) '
          '| onnxruntime / PyTorch (runs) |')
    print('|---|---|---|---|---|')
    for name, diff, pairs, ratios in rows:
        torch_ms = ', '.join(p.split('/')[0] for p in pairs)
        ort_ms = ', '.join(p.split('/')[1] for p in pairs)
        print(f'| {name} | {diff:.1e} | {torch_ms} | {ort_ms} | '
              f'{", ".join(f"{r:.2f}" for r in ratios)} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
