"""Where RSWAtt's windows go: the distribution of the window extents every
RSWAtt layer predicts, for one or more checkpoints, as a PNG of histograms
and printed statistics.

    python tools/analysis_tools/rswatt_extents.py CONFIG \\
        --checkpoints init work_dirs/x/iter_60.pth --labels before after \\
        --images data/shapes/ade/images/validation --out extents.png

``init`` is the config's model freshly initialised (``init_weights``).
Each image is resized to ``--size`` on its short side, normalised with the
config's data preprocessor and run through the backbone (and, for models
that have them, plug-ins and decode heads: every
``ReconstructedWindowAttention`` with soft windows reports). The plot shows,
per largest window M, the predicted window width (left + right + 1) and
height (top + bottom + 1) as fractions of M.
"""
import argparse
import glob
import importlib
import os.path as osp
import sys

import mmcv
import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.runner import load_checkpoint

import mmvisattn  # noqa: F401
from mmvisattn.models.layers import ReconstructedWindowAttention
# helpers the tools share (tools/tool_common.py, not part of the package)
sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..'))
from tool_common import config_scope  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--checkpoints', nargs='+', required=True,
                        help="checkpoint files, or 'init'")
    parser.add_argument('--labels', nargs='+', help='one per checkpoint')
    parser.add_argument('--images', nargs='+', required=True,
                        help='image files or folders')
    parser.add_argument('--max-images', type=int, default=8)
    parser.add_argument('--size', type=int, default=128,
                        help='short side of the images fed to the model')
    parser.add_argument('--out', default='rswatt_extents.png')
    args = parser.parse_args(argv)
    if args.labels and len(args.labels) != len(args.checkpoints):
        parser.error('give one --labels entry per checkpoint')
    return args


def image_files(paths, limit):
    files = []
    for path in paths:
        if osp.isdir(path):
            files += sorted(glob.glob(osp.join(path, '*.jpg')) +
                            glob.glob(osp.join(path, '*.png')))
        elif osp.isfile(path):
            files.append(path)
        else:
            raise FileNotFoundError(f'no image or folder at {path}')
    if not files:
        raise FileNotFoundError(f'no .jpg/.png images in {paths}')
    return files[:limit]


def build(cfg, scope, checkpoint):
    registry = importlib.import_module(f'{scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(scope):
        model = registry.build(cfg.model)
    model.init_weights()
    if checkpoint != 'init':
        load_checkpoint(model, checkpoint, map_location='cpu')
    return model.eval()


def collect_extents(model, images, mean, std, size):
    """{M: (n, 4) extents in pixels} over every soft RSWAtt layer."""
    layers = [m for m in model.modules()
              if isinstance(m, ReconstructedWindowAttention)
              and m.reconstruct == 'soft']
    if not layers:
        raise ValueError('the model has no RSWAtt layer with soft windows')
    found = {}

    def record(module, args, output):
        for s, m in enumerate(module.window_sizes):
            found.setdefault(m, []).append(
                module.last_extents[..., s, :].reshape(-1, 4))

    handles = [layer.register_forward_hook(record) for layer in layers]
    for layer in layers:
        layer.record_extents = True
    try:
        with torch.no_grad():
            for path in images:
                img = mmcv.imread(path, channel_order='rgb')
                img = mmcv.imrescale(img, size / min(img.shape[:2]))
                x = torch.from_numpy(img).permute(2, 0, 1).float()[None]
                x = (x - mean) / std
                feats = model.extract_feat(x) if hasattr(
                    model, 'extract_feat') else model.backbone(x)
                if hasattr(model, 'decode_head'):
                    model.decode_head(feats)
    finally:
        for layer, handle in zip(layers, handles):
            layer.record_extents = False
            handle.remove()
    return {m: torch.cat(v).numpy() for m, v in found.items()}


def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    scope = config_scope(cfg, args.config)
    pre = cfg.model.get('data_preprocessor', {})
    mean = torch.tensor(pre.get('mean', [0., 0., 0.])).view(1, 3, 1, 1)
    std = torch.tensor(pre.get('std', [1., 1., 1.])).view(1, 3, 1, 1)
    images = image_files(args.images, args.max_images)
    labels = args.labels or args.checkpoints
    results = {}
    for label, ckpt in zip(labels, args.checkpoints):
        model = build(cfg, scope, ckpt)
        results[label] = collect_extents(model, images, mean, std, args.size)
        for m, ext in sorted(results[label].items()):
            width = (ext[:, 0] + ext[:, 1] + 1) / m
            height = (ext[:, 2] + ext[:, 3] + 1) / m
            print(f'{label}: largest window {m}: width/M mean {width.mean():.3f}'
                  f' std {width.std():.3f}, height/M mean {height.mean():.3f}'
                  f' std {height.std():.3f} over {len(ext)} positions')

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    sizes = sorted(next(iter(results.values())))
    fig, axes = plt.subplots(len(sizes), 2, figsize=(9, 3 * len(sizes)),
                             squeeze=False)
    for row, m in enumerate(sizes):
        for col, (name, sides) in enumerate((('width', (0, 1)),
                                             ('height', (2, 3)))):
            ax = axes[row][col]
            values = {
                label: (found[m][:, sides[0]] + found[m][:, sides[1]] + 1) / m
                for label, found in results.items()
            }
            everything = np.concatenate(list(values.values()))
            # bins over the observed range (+-1% of M): early in training
            # the windows move by a few hundredths of M
            bins = np.linspace(everything.min() - 0.01,
                               everything.max() + 0.01, 41)
            for label, value in values.items():
                ax.hist(value, bins=bins, alpha=0.55, label=label)
            ax.set_title(f'largest window {m}: predicted {name} / {m}')
            ax.set_ylabel('positions')
            ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f'saved {args.out} ({len(images)} images, '
          f'{len(next(iter(results.values()))[sizes[0]])} positions per '
          'window size)')


if __name__ == '__main__':
    main()
