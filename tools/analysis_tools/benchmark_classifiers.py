"""ImageNet classifier throughput in the spirit of the Swin paper's Table 1:
images/s of inference at batch 64 for every classifier architecture
of ``get_flops.py --table1``, measured in one run, with ratios to our Swin-T and
mmpretrain 1.2.0's own Swin-T (the peer, same architecture) in the table.

    python tools/analysis_tools/benchmark_classifiers.py [--batch 64]
        [--repeats 2] [--with-384] [--device cpu|cuda] [--fp16]

Models run round-robin (warm-up pass first, then ``--repeats`` rounds; the
median per model), so that machine noise hits all of them alike: read the
ratios, not the seconds. The 224 models run at 224x224; ``--with-384`` adds
the 384px fine-tuned ones at 384x384 (the paper's table lists those at
384). No weights are loaded: speed does not depend on them.
"""
import argparse
import copy
import importlib
import os.path as osp
import statistics
import time

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import mmvisattn  # registers the models; runtime() below

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
from mmvisattn.analysis.flops import (classification_shape,  # noqa
                                   strip_pretrained)

PEER = 'mmpretrain Swin-T (peer)'
# One config per architecture of get_flops.py's TABLE1 (the 22K->1K Swin-B
# is the 1K Swin-B's network; Swin-L exists only 22K-pre-trained).
MODELS = [
    'swin/swin-t-p4-w7_16xb64_300e_in1k.py',
    'swin/swin-s-p4-w7_16xb64_300e_in1k.py',
    'swin/swin-b-p4-w7_16xb64_300e_in1k.py',
    'swin/swin-l-p4-w7_in22k-pre_16xb64_30e_in1k.py',
    'swin/swin-b-p4-w12_16xb64_30e_in1k-384px.py',
    'swin/swin-l-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py',
    'tnt/tnt-s-p16_16xb64_300e_in1k.py',
    'tnt/tnt-b-p16_16xb64_300e_in1k.py',
    'rswatt/rswatt-t_16xb64_300e_in1k.py',
]


def build(path):
    cfg = Config.fromfile(path)
    model_cfg = copy.deepcopy(cfg.model)
    strip_pretrained(model_cfg)
    model_cfg.pop('train_cfg', None)  # batch augments: training only
    registry = importlib.import_module('mmpretrain.registry').MODELS
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = registry.build(model_cfg)
    return model, classification_shape(cfg)


def build_peer():
    from mmpretrain.models import ImageClassifier
    model = ImageClassifier(
        backbone=dict(type='mmpretrain.SwinTransformer', arch='tiny',
                      img_size=224),
        neck=dict(type='mmpretrain.GlobalAveragePooling'),
        head=dict(type='mmpretrain.LinearClsHead', num_classes=1000,
                  in_channels=768))
    return model, (224, 224)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('--with-384', action='store_true')
    parser.add_argument('--device', default='cuda'
                        if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--fp16', action='store_true',
                        help='autocast to float16 (GPU)')
    parser.add_argument('--only', nargs='+', metavar='SUBSTRING',
                        help='only configs whose path contains one of these')
    args = parser.parse_args(argv)

    models = {}
    for pattern in MODELS:
        if '384px' in pattern and not args.with_384:
            continue
        if args.only and not any(s in pattern for s in args.only):
            continue
        models[osp.basename(pattern)[:-3]] = build(
            osp.join(REPO, 'configs', pattern))
    models[PEER] = build_peer()
    device = torch.device(args.device)
    inputs = {}
    for name, (model, shape) in models.items():
        model.to(device).eval()
        inputs[name] = torch.randn(args.batch, 3, *shape, device=device)

    def run(name):
        model = models[name][0]
        with torch.no_grad(), torch.autocast(
                device.type, dtype=torch.float16, enabled=args.fp16):
            if device.type == 'cuda':
                torch.cuda.synchronize()
            start = time.perf_counter()
            model.head(model.extract_feat(inputs[name]))  # the logits
            if device.type == 'cuda':
                torch.cuda.synchronize()
        return time.perf_counter() - start

    for name in models:  # warm-up
        run(name)
    times = {name: [] for name in models}
    for _ in range(args.repeats):
        for name in models:
            times[name].append(run(name))
    rate = {n: args.batch / statistics.median(t) for n, t in times.items()}
    ref = rate['swin-t-p4-w7_16xb64_300e_in1k'] if \
        'swin-t-p4-w7_16xb64_300e_in1k' in rate else None
    print(f'device {device} ({torch.get_num_threads()} threads), batch '
          f'{args.batch}, median of {args.repeats}, '
          f'{"fp16" if args.fp16 else "fp32"}')
    print(f'{"model":<52} {"input":>7} {"images/s":>9} {"vs Swin-T":>9} '
          f'{"vs peer":>8}')
    for name, (model, shape) in models.items():
        vs_t = f'{rate[name] / ref:9.2f}' if ref else f'{"-":>9}'
        print(f'{name:<52} {shape[0]:>7} {rate[name]:9.2f} {vs_t} '
              f'{rate[name] / rate[PEER]:8.2f}')
    return rate


if __name__ == '__main__':
    main()
