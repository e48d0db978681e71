"""Params and FLOPs of a detector, segmentor or Swin classifier.

    # a whole detector / segmentor from its config (no weights downloaded)
    python tools/analysis_tools/get_flops.py CONFIG [--shape H W] \\
        [--convention paper|mmcv1|fvcore] [--breakdown [DEPTH]] \\
        [--cfg-options k=v ...]
    # the paper's Table 2 and 3 figures for every zoo config that exists
    python tools/analysis_tools/get_flops.py --table [--config-dir DIR]
    # the ImageNet classifiers of Table 1 and the TNT paper (configs)
    python tools/analysis_tools/get_flops.py --table1
    # a Swin classifier without a config: Swin-T 28.3M / 4.5G at 224
    python tools/analysis_tools/get_flops.py --arch tiny --shape 224 224

FLOPs are multiply-adds (1 MAC = 1 FLOP). ``--shape H W`` is the input
height and width. Defaults: detectors 800 1280, the paper's "1280x800"
(mmdet 2.x's tool actually fed a 1280-high, 800-wide tensor; the counts of
these models are identical either way); segmentors H 4H for a config with
H x H crops (Table 3: 512 2048, and 640 2560 for the 640x640 models);
classifiers the test pipeline's crop (224, or 384 for the 384px configs).

Detectors and segmentors are counted as the paper's figures were, with mmdet
2.x / mmseg 0.x's get_flops: the ``forward_dummy`` of those versions
(two-stage: RPN head, box heads on 1000 random proposals, mask heads on 100 of
them; Sparse R-CNN: its learned proposals through every stage; segmentors: no
auxiliary head), counted by mmcv 1.x's module hooks (convs, linears, norms,
ReLUs, pools; GELU, softmax, RoIAlign, interpolation and the heads' bmm are
free) plus the backbone's attention matmuls (QK^T and AV on the padded window
grid; also those of every RSWAtt attention outside the backbone: RSWAttNeck,
the RSWAtt decode heads) and deformable convs counted as plain convs of their
kernel (RepPoints v2): ``--convention paper``, the default, within 0.7% of
every Table 2 entry. ``mmcv1`` leaves out the attention matmuls; ``fvcore``
jit-traces the same forward and counts every matmul (slower). Parameters are
the trainable ones, as mmcv counts them. See
``mmvisattn/analysis/complexity.py``.
"""
import argparse
import glob
import os.path as osp
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from mmengine.config import DictAction

import mmvisattn  # registers the models; runtime() below
from mmvisattn.analysis.complexity import (
    CONVENTIONS,
    get_complexity,
    group_by_prefix,
)
from mmvisattn.analysis.flops import count_config

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

# The paper's Table 2 (and the official detection repo's README): config
# name (a glob under configs/swin) -> (params M, FLOPs G) at 1280x800.
ZOO: List[Tuple[str, Optional[float], Optional[float]]] = [
    ('cascade-mask-rcnn_r50_fpn_giou-4conv1f_ms-crop-3x_coco.py', 82, 739),
    ('cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py',
     86, 745),
    ('cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
     86, 745),
    ('cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py',
     107, 838),
    ('cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
     107, 838),
    ('cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-1x_coco.py',
     145, 982),
    ('cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py',
     145, 982),
    # Mask R-CNN: the official detection repo's README (not in the paper)
    ('mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py', 48, 267),
    ('mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py', 48, 267),
    ('mask-rcnn_swin-s-p4-w7_fpn_ms-crop-3x_coco.py', 69, 359),
    ('atss_r50_fpn_ms-3x_coco.py', 32, 205),
    ('atss_swin-t-p4-w7_fpn_ms-3x_coco.py', 36, 215),
    ('sparse-rcnn_r50_fpn_300-proposals_ms-3x_coco.py', 106, 166),
    ('sparse-rcnn_swin-t-p4-w7_fpn_300-proposals_ms-3x_coco.py', 110, 172),
    # RepPoints v2: the Swin authors' BiFPN model is Table 2's; deformable
    # convs are counted as convs of their kernel (--convention paper)
    ('reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py', 42, 274),
    ('reppoints-v2_swin-t-p4-w7_bifpn_giou-qfl_ms-480-960-3x_coco.py', 45,
     283),
    # the RepPoints v2 authors' FPN model: not in the paper, for reference
    ('reppoints-v2_*_fpn_giou_ms-3x_coco.py', None, None),
    # HTC++ (semantic branch, extra global block): Table 2(b)/(c)
    ('htc++_swin-b-*.py', 160, 1043),
    ('htc++_swin-l-*.py', 284, 1470),
    # without the semantic branch: not in the paper, counted for reference
    ('htc*-without-semantic_swin-*.py', None, None),
    # ADE20K UperNet, Table 3 (Swin-B 512: the official release's row)
    ('upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py', 60, 945),
    ('upernet_swin-s-p4-w7_8xb2-160k_ade20k-512x512.py', 81, 1038),
    ('upernet_swin-b-p4-w7_8xb2-160k_ade20k-512x512.py', 121, 1188),
    ('upernet_swin-b-p4-w7_8xb2-160k_ade20k-640x640.py', 121, 1841),
    ('upernet_swin-l-p4-w12_8xb2-160k_ade20k-640x640.py', 234, 3230),
]


# Swin paper Table 1 and TNT paper Table 2 (ImageNet-1K classifiers, 1000
# classes): config under configs/ -> (params M, FLOPs G) at its input size.
# The 22K pre-training configs (21841-class heads) are counted, not compared.
TABLE1: List[Tuple[str, Optional[float], Optional[float]]] = [
    ('swin/swin-t-p4-w7_16xb64_300e_in1k.py', 28, 4.5),
    ('swin/swin-s-p4-w7_16xb64_300e_in1k.py', 50, 8.7),
    ('swin/swin-b-p4-w7_16xb64_300e_in1k.py', 88, 15.4),
    ('swin/swin-b-p4-w12_16xb64_30e_in1k-384px.py', 88, 47.0),
    ('swin/swin-b-p4-w7_in22k-pre_16xb64_30e_in1k.py', 88, 15.4),
    ('swin/swin-b-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py', 88, 47.0),
    ('swin/swin-l-p4-w7_in22k-pre_16xb64_30e_in1k.py', 197, 34.5),
    ('swin/swin-l-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py', 197, 103.9),
    ('swin/swin-*_64xb64_90e_in22k.py', None, None),
    ('tnt/tnt-s-p16_16xb64_300e_in1k.py', 23.8, 5.2),
    ('tnt/tnt-b-p16_16xb64_300e_in1k.py', 65.6, 14.1),
    ('rswatt/rswatt-t_16xb64_300e_in1k.py', None, None),
]


def _fmt_breakdown(result: Dict, depth: int) -> str:
    groups = group_by_prefix(result['by_module'], depth)
    params = result['params_by_module']
    total = result['flops'] or 1.
    lines = [f'  {"component":<40} {"params(M)":>10} {"FLOPs(G)":>10} '
             f'{"share":>7}']
    for name, flops in sorted(groups.items(), key=lambda kv: -kv[1]):
        p = params.get(name) if depth == 1 else None
        p = f'{p / 1e6:10.2f}' if p is not None else f'{"":>10}'
        lines.append(f'  {name:<40} {p} {flops / 1e9:10.2f} '
                     f'{flops / total:7.1%}')
    return '\n'.join(lines)


def print_result(name: str, result: Dict, breakdown: Optional[int] = None):
    h, w = result['shape']
    extra = ''
    if result['params_all'] != result['params']:
        extra = f' ({result["params_all"] / 1e6:.2f}M with frozen ones)'
    print(f'{name}\n  input 3x{h}x{w} (HxW), convention '
          f'{result["convention"]}: params {result["params"] / 1e6:.2f}M'
          f'{extra}, FLOPs {result["flops"] / 1e9:.1f}G')
    if breakdown:
        print(_fmt_breakdown(result, breakdown))


def find_zoo_configs(config_dir: str, zoo=ZOO) -> List[tuple]:
    """(pattern, path or None, paper params M, paper FLOPs G) per entry."""
    rows = []
    for pattern, params, flops in zoo:
        paths = sorted(glob.glob(osp.join(config_dir, pattern)))
        if not paths:
            rows.append((pattern, None, params, flops))
        rows.extend((pattern, p, params, flops) for p in paths)
    return rows


def run_table(config_dir: str, shape: Optional[Sequence[int]],
              convention: str, zoo=ZOO,
              title: str = 'Swin paper Tables 2 and 3 (detectors at '
              '1280x800, segmentors at 4H x H for H x H crops)'):
    header = (f'{"config":<74} {"input WxH":>10} '
              f'{"params(M) ours/paper":>21} {"diff":>6}  '
              f'{"FLOPs(G) ours/paper":>21} {"diff":>6}')
    print(f'{title}, convention {convention}')
    print(header)
    print('-' * len(header))
    worst = []
    for pattern, path, p_params, p_flops in find_zoo_configs(config_dir, zoo):
        if path is None:
            print(f'{pattern:<74} (no such config yet: skipped)')
            continue
        r = count_config(path, shape, convention)
        params, flops = r['params'] / 1e6, r['flops'] / 1e9
        size = f'{r["shape"][1]}x{r["shape"][0]}'
        if p_params is None:
            print(f'{osp.basename(path):<74} {size:>10} {params:9.1f} /     '
                  f'-       -  {flops:9.1f} /     -       -', flush=True)
            continue
        dp, df = params / p_params - 1, flops / p_flops - 1
        worst.append((max(abs(dp), abs(df)), osp.basename(path)))
        print(f'{osp.basename(path):<74} {size:>10} {params:9.1f} /'
              f'{p_params:6g}    {dp:+6.1%}  {flops:9.1f} /{p_flops:6g}'
              f'    {df:+6.1%}', flush=True)
    if worst:
        diff, name = max(worst)
        print(f'largest difference: {diff:.1%} ({name}; see the README for '
              'the rows beyond 3%)')


def run_classifier(args):
    from mmpretrain.models import ImageClassifier

    from mmvisattn.models.backbones import SwinTransformer
    shape = tuple(args.shape or (224, 224))
    channels = SwinTransformer.arch_zoo[args.arch]['embed_dims'] * 8
    model = ImageClassifier(
        backbone=dict(type='mmvisattn.SwinTransformer', arch=args.arch,
                      window_size=args.window_size, out_indices=(3, )),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', num_classes=args.num_classes,
                  in_channels=channels))
    result = get_complexity(model, (3, *shape))
    print(f'Swin-{args.arch[0].upper()} classifier, input 3x{shape[0]}x'
          f'{shape[1]}, window {args.window_size}: '
          f'params {result["params"] / 1e6:.2f}M, '
          f'FLOPs {result["flops"] / 1e9:.2f}G')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument('config', nargs='?',
                        help='mmdet/mmseg config (omit with --arch/--table)')
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'),
                        help='input height and width (default: 800 1280 '
                        'for detectors, H 4H for segmentors with HxH crops '
                        '(512 2048), 224 224 for --arch)')
    parser.add_argument('--convention', choices=CONVENTIONS,
                        default='paper',
                        help='paper (default): mmcv 1.x module hooks plus '
                        'the backbone\'s attention matmuls (and every '
                        'RSWAtt attention\'s), which '
                        'reproduces Table 2; mmcv1: module hooks only; '
                        'fvcore: jit trace, every matmul (slow)')
    parser.add_argument('--breakdown', type=int, nargs='?', const=1,
                        metavar='DEPTH',
                        help='FLOPs per component (module-name prefix of '
                        'DEPTH parts, default 1: backbone, neck, heads)')
    parser.add_argument('--table', action='store_true',
                        help='count every zoo config of the paper\'s Tables '
                        '2 and 3 against its published figures')
    parser.add_argument('--table1', action='store_true',
                        help='count the ImageNet classifier configs against '
                        'the Swin paper\'s Table 1 and the TNT paper')
    parser.add_argument('--config-dir', default=None,
                        help='where --table (default configs/swin) or '
                        '--table1 (default configs) looks for the configs')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries')
    cls = parser.add_argument_group('classifier mode (Table 1)')
    cls.add_argument('--arch', choices=['tiny', 'small', 'base', 'large'],
                     help='count a Swin ImageNet classifier instead')
    cls.add_argument('--window-size', type=int, default=7)
    cls.add_argument('--num-classes', type=int, default=1000)
    args = parser.parse_args(argv)
    modes = sum([
        args.config is not None, args.arch is not None, args.table,
        args.table1
    ])
    if modes == 0:
        args.arch = 'tiny'  # the tool's original behaviour
    elif modes > 1:
        parser.error('give one of CONFIG, --arch, --table, --table1')
    return args


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    if args.arch is not None:
        run_classifier(args)
    elif args.table:
        run_table(args.config_dir or osp.join(REPO, 'configs', 'swin'),
                  tuple(args.shape) if args.shape else None, args.convention)
    elif args.table1:
        run_table(
            args.config_dir or osp.join(REPO, 'configs'),
            tuple(args.shape) if args.shape else None, args.convention,
            TABLE1, 'Swin paper Table 1 and TNT paper (ImageNet classifiers '
            'at their test input)')
    else:
        result = count_config(args.config, args.shape, args.convention,
                              args.cfg_options)
        print_result(args.config, result, args.breakdown)
    return 0


if __name__ == '__main__':
    sys.exit(main())
