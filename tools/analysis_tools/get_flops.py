"""Params and FLOPs of a Swin classifier (the paper's Table 1 figures).

    python tools/analysis_tools/get_flops.py --arch tiny --shape 224 224

Counts with mmengine's FlopAnalyzer (multiply-adds, fvcore convention) plus a
handle for the fused attention kernel; see mmvisattn/utils/complexity.py.
"""
import argparse

import mmvisattn  # noqa: F401
from mmvisattn.utils.complexity import get_complexity


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--arch', default='tiny',
                        choices=['tiny', 'small', 'base', 'large'])
    parser.add_argument('--shape', type=int, nargs=2, default=(224, 224))
    parser.add_argument('--window-size', type=int, default=7)
    parser.add_argument('--num-classes', type=int, default=1000)
    args = parser.parse_args()

    from mmpretrain.models import ImageClassifier
    from mmvisattn.models.backbones import SwinTransformer
    channels = SwinTransformer.arch_zoo[args.arch]['embed_dims'] * 8
    model = ImageClassifier(
        backbone=dict(type='mmvisattn.SwinTransformer', arch=args.arch,
                      window_size=args.window_size, out_indices=(3, )),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', num_classes=args.num_classes,
                  in_channels=channels))
    result = get_complexity(model, (3, *args.shape))
    print(f'Swin-{args.arch[0].upper()} classifier, input 3x{args.shape[0]}x'
          f'{args.shape[1]}, window {args.window_size}: '
          f'params {result["params"] / 1e6:.2f}M, '
          f'FLOPs {result["flops"] / 1e9:.2f}G')


if __name__ == '__main__':
    main()
