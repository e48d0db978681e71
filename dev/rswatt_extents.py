"""Where RSWAtt's windows go: the distribution of the window extents every
RSWAtt layer predicts, for one or more checkpoints, as a PNG of histograms
and printed statistics.

    python dev/rswatt_extents.py CONFIG \\
        --checkpoints init work_dirs/x/iter_60.pth --labels before after \\
        --images data/shapes/ade/images/validation --out extents.png

``init`` is the config's model freshly initialised (``init_weights``).
Each image is resized to ``--size`` on its short side, normalised with the
config's data preprocessor and run through the backbone (and, for models that
have them, plug-ins and decode heads: every ``ReconstructedWindowAttention``
with a window predictor reports the ``extents`` of its output). The plot shows,
per largest window M, the predicted window width (left + right + 1) and height
(top + bottom + 1) as fractions of M.

With ``--annotations DIR`` (label maps named as the images, 0 = background,
as the shapes ADE set's), it also asks whether the windows follow content:
every position's window area (width x height, as a fraction of M x M) is
paired with the object under it (the connected region of its label,
resized to the layer's map) and the tool prints, per checkpoint and M, the
mean window area on objects and on background and the Spearman rank
correlation between window area and object size (the square root of the
object's area in the layer's pixels), and adds a row of binned plots.
``--per-layer`` (with ``--annotations``) also prints, per layer and M, a
table of the mean window area against the object size in image pixels
(bins ``--size-bins``).
"""
import argparse
import glob
import importlib
import os.path as osp

import mmcv
import numpy as np
import torch
from mmengine.config import Config, DictAction
from mmengine.registry import DefaultScope
from mmengine.runner import load_checkpoint

import mmvisattn  # registers the models; runtime() below
from mmvisattn.cli import config_scope
from mmvisattn.models.layers import ReconstructedWindowAttention


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
    parser.add_argument('--annotations',
                        help='folder of label maps named as the images '
                        '(0 = background): correlate windows with objects')
    parser.add_argument('--per-layer', action='store_true',
                        help='with --annotations: also print, per layer '
                        '(stage i block j of a backbone, or the module '
                        'holding the attention) and M, the mean window '
                        'area against the '
                        'object size in image pixels (size bins '
                        '--size-bins), for every checkpoint')
    parser.add_argument('--size-bins', type=float, nargs='+',
                        default=[4, 8, 16, 32, 64],
                        help='object size bin edges, sqrt(area) in image '
                        'pixels at --size (background is its own row)')
    parser.add_argument('--out', default='rswatt_extents.png')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, as tools/train.py '
                        "(e.g. the layer options a checkpoint was trained "
                        'with)')
    args = parser.parse_args(argv)
    if args.labels and len(args.labels) != len(args.checkpoints):
        parser.error('give one --labels entry per checkpoint')
    if args.per_layer and not args.annotations:
        parser.error('--per-layer needs --annotations')
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


def object_sizes(label: np.ndarray) -> np.ndarray:
    """Per pixel: the area (pixels) of the connected region of its label,
    0 on background (label 0)."""
    from scipy import ndimage
    sizes = np.zeros(label.shape, np.float64)
    for value in np.unique(label):
        if value == 0:
            continue
        regions, count = ndimage.label(label == value)
        areas = np.bincount(regions.ravel())
        inside = regions > 0
        sizes[inside] = areas[regions[inside]]
    return sizes


def run_images(model, images, mean, std, size, annotations, record,
               current):
    """Run ``model`` on ``images`` (short side ``size``) with ``record`` as
    a forward hook on every RSWAtt layer that predicts windows; with
    ``annotations``, ``current['sizes']`` holds the object sizes
    (:func:`object_sizes`) of the image being run."""
    layers = [m for m in model.modules()
              if isinstance(m, ReconstructedWindowAttention)
              and m.window_pred is not None]
    if not layers:
        raise ValueError('the model has no RSWAtt layer with a window '
                         'predictor')
    handles = [layer.register_forward_hook(record) for layer in layers]
    try:
        with torch.no_grad():
            for path in images:
                img = mmcv.imread(path, channel_order='rgb')
                factor = size / min(img.shape[:2])
                img = mmcv.imrescale(img, factor)
                if annotations is not None:
                    label = mmcv.imread(osp.join(annotations,
                                                 osp.basename(path)),
                                        'unchanged')
                    if label is None:
                        raise FileNotFoundError(
                            f'--annotations: no label map '
                            f'{osp.basename(path)} in {annotations}')
                    label = mmcv.imrescale(label, factor,
                                           interpolation='nearest')
                    current['sizes'] = object_sizes(label)
                x = torch.from_numpy(img).permute(2, 0, 1).float()[None]
                x = (x - mean) / std
                feats = model.extract_feat(x) if hasattr(
                    model, 'extract_feat') else model.backbone(x)
                if hasattr(model, 'decode_head'):
                    model.decode_head(feats)
    finally:
        for handle in handles:
            handle.remove()


def collect_extents(model, images, mean, std, size, annotations=None):
    """{M: (n, 4) extents in pixels} over every RSWAtt layer with a window
    predictor; with ``annotations`` also {M: (n, ) object size} (the square
    root of the object's area in the layer's pixels, 0 on background)."""
    found, objects = {}, {}
    current = {}

    def record(module, args, output):
        extents = output.extents  # (B, h, w, scales, 4)
        h, w = extents.shape[1:3]
        if 'sizes' in current:
            area = mmcv.imresize(current['sizes'], (w, h),
                                 interpolation='nearest')
            # in the layer's pixels: the map is (h, w) of the image's
            scale = h * w / current['sizes'].size
            size = torch.from_numpy(np.sqrt(area * scale)).reshape(-1)
        for s, m in enumerate(module.scale_windows):
            found.setdefault(m, []).append(extents[..., s, :].reshape(-1, 4))
            if 'sizes' in current:
                objects.setdefault(m, []).append(size)

    run_images(model, images, mean, std, size, annotations, record,
               current)
    extents = {m: torch.cat(v).numpy() for m, v in found.items()}
    if annotations is None:
        return extents, None
    return extents, {m: torch.cat(v).numpy() for m, v in objects.items()}


def layer_of(name: str) -> str:
    """'backbone.layers.2.blocks.1.attn' -> 'stage 3 block 2'; other
    modules: the name without its last part."""
    parts = name.split('.')
    if 'layers' in parts:
        i = parts.index('layers')
        if i + 1 < len(parts) and parts[i + 1].isdigit():
            out = f'stage {int(parts[i + 1]) + 1}'
            if 'blocks' in parts[i:]:
                j = parts.index('blocks', i)
                if j + 1 < len(parts) and parts[j + 1].isdigit():
                    out += f' block {int(parts[j + 1]) + 1}'
            return out
    return '.'.join(parts[:-1]) or name


def collect_per_layer(model, images, mean, std, size, annotations):
    """{(layer, M): (window area / M^2, object size)} per position of every
    layer with a window predictor; object size is sqrt(area) of the
    connected region under the position in the *image's* pixels (0 on
    background), so that layers of different strides compare."""
    names = {m: n for n, m in model.named_modules()}
    found = {}
    current = {}

    def record(module, args, output):
        extents = output.extents  # (B, h, w, scales, 4)
        h, w = extents.shape[1:3]
        area = mmcv.imresize(current['sizes'], (w, h),
                             interpolation='nearest')
        obj = np.sqrt(area).reshape(-1)
        for s, m in enumerate(module.scale_windows):
            e = extents[..., s, :].reshape(-1, 4).numpy()
            a = (e[:, 0] + e[:, 1] + 1) * (e[:, 2] + e[:, 3] + 1) / m**2
            key = (layer_of(names[module]), m)
            found.setdefault(key, []).append((a, obj))

    run_images(model, images, mean, std, size, annotations, record,
               current)
    return {k: (np.concatenate([a for a, _ in v]),
                np.concatenate([o for _, o in v]))
            for k, v in found.items()}


def per_layer_table(per_layer, edges) -> str:
    """Markdown: one row per (layer, M), mean window area / M^2 on
    background and per object-size bin, and Spearman rho on objects."""
    bins = list(zip([0.] + list(edges), list(edges) + [float('inf')]))
    heads = [f'{lo:g}-{hi:g} px' if hi != float('inf') else f'>= {lo:g} px'
             for lo, hi in bins]
    lines = ['| layer | M | background | ' + ' | '.join(heads) +
             ' | rho (area, size) |',
             '|---|---|---|' + '---|' * len(heads) + '---|']
    for (layer, m), (area, obj) in sorted(per_layer.items()):
        cells = [f'{area[obj == 0].mean():.3f}' if (obj == 0).any()
                 else '-']
        for lo, hi in bins:
            inside = (obj > 0) & (obj >= lo) & (obj < hi)
            cells.append(f'{area[inside].mean():.3f} ({inside.sum()})'
                         if inside.any() else '-')
        fg = obj > 0
        rho = spearman(area[fg], obj[fg]) if fg.sum() > 2 else float('nan')
        lines.append(f'| {layer} | {m} | ' + ' | '.join(cells) +
                     f' | {rho:+.2f} |')
    return '\n'.join(lines)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr
    if a.std() == 0 or b.std() == 0:
        return float('nan')
    return float(spearmanr(a, b).statistic)


def follow_content(extents, sizes, m):
    """Window area fraction, and its summary against the objects."""
    ext = extents[m]
    area = (ext[:, 0] + ext[:, 1] + 1) * (ext[:, 2] + ext[:, 3] + 1) / m**2
    fg = sizes[m] > 0
    return area, dict(
        fg=float(area[fg].mean()) if fg.any() else float('nan'),
        bg=float(area[~fg].mean()) if (~fg).any() else float('nan'),
        rho=spearman(area[fg], sizes[m][fg]) if fg.sum() > 2 else
        float('nan'))


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    scope = config_scope(cfg, args.config)
    pre = cfg.model.get('data_preprocessor', {})
    mean = torch.tensor(pre.get('mean', [0., 0., 0.])).view(1, 3, 1, 1)
    std = torch.tensor(pre.get('std', [1., 1., 1.])).view(1, 3, 1, 1)
    images = image_files(args.images, args.max_images)
    labels = args.labels or args.checkpoints
    results, objects, follow = {}, {}, {}
    for label, ckpt in zip(labels, args.checkpoints):
        model = build(cfg, scope, ckpt)
        results[label], objects[label] = collect_extents(
            model, images, mean, std, args.size, args.annotations)
        if objects[label] is not None:
            follow[label] = {m: follow_content(results[label],
                                               objects[label], m)
                             for m in results[label]}
        if args.per_layer:
            print(f'{label}: mean window area / M^2 per layer against the '
                  f'object size (sqrt area, image pixels at short side '
                  f'{args.size}; positions in brackets)')
            print(per_layer_table(
                collect_per_layer(model, images, mean, std, args.size,
                                  args.annotations), args.size_bins))
        for m, ext in sorted(results[label].items()):
            width = (ext[:, 0] + ext[:, 1] + 1) / m
            height = (ext[:, 2] + ext[:, 3] + 1) / m
            print(f'{label}: largest window {m}: width/M mean {width.mean():.3f}'
                  f' std {width.std():.3f}, height/M mean {height.mean():.3f}'
                  f' std {height.std():.3f} over {len(ext)} positions')
            if label in follow:
                _, summary = follow[label][m]
                print(f'{label}: largest window {m}: window area / M^2 on '
                      f'objects {summary["fg"]:.3f}, on background '
                      f'{summary["bg"]:.3f}; Spearman rho(area, object '
                      f'size) {summary["rho"]:+.3f}')

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    sizes = sorted(next(iter(results.values())))
    columns = 2 if args.annotations is None else 3
    fig, axes = plt.subplots(len(sizes), columns,
                             figsize=(4.5 * columns, 3 * len(sizes)),
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
        if args.annotations is not None:
            ax = axes[row][2]
            for label in results:
                area, summary = follow[label][m]
                size = objects[label][m]
                edges = np.unique(np.quantile(size[size > 0],
                                              np.linspace(0, 1, 7)))
                centres, means = [0.], [summary['bg']]
                for lo, hi in zip(edges[:-1], edges[1:]):
                    inside = (size >= lo) & (size <= hi) & (size > 0)
                    if inside.any():
                        centres.append(size[inside].mean())
                        means.append(area[inside].mean())
                ax.plot(centres, means, 'o-',
                        label=f'{label} (rho {summary["rho"]:+.2f})')
            ax.set_title(f'largest window {m}: window area vs object')
            ax.set_xlabel('object size (sqrt area, layer px; 0 = bg)')
            ax.set_ylabel(f'mean window area / {m}x{m}')
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f'saved {args.out} ({len(images)} images, '
          f'{len(next(iter(results.values()))[sizes[0]])} positions per '
          'window size)')


if __name__ == '__main__':
    main()
