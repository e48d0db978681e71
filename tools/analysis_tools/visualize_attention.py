"""Attention of the backbones on one image, as PNG figures: Swin's regular
and shifted window partitions and one query's window attention, TNT's inner
(word), outer (sentence) and class-token attention, RSWAtt's predicted
windows.

    python tools/analysis_tools/visualize_attention.py IMAGE \\
        --model {swin,tnt,rswatt} [--config CONFIG] [--checkpoint CKPT] \\
        [--query X Y] [--stage S] [--block B] [--size H W] --out-dir DIR

Without ``--config`` the backbone alone is built (Swin-T, TNT-S, RSWAtt-nano)
with its random initialisation; with it, the config's ``model.backbone``.
``--checkpoint`` takes a whole detector / segmentor checkpoint (its
``backbone.`` keys) or a bare backbone state dict. The image is resized to
``--size`` and normalised with the ImageNet mean/std, RGB.

The fused attention kernels never form the probabilities: a forward hook
captures the input of the chosen attention module, and the probabilities are
recomputed from it with the module's own weights (qkv, relative position
bias, shift mask), through the ops the modules use. ``--query`` is a pixel
(x, y) of the resized image (default its centre).
"""
import argparse
import io
import math
import os
import os.path as osp
from typing import NamedTuple, Optional, Sequence, Tuple

import matplotlib

matplotlib.use('Agg')
import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import mmcv
import numpy as np
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from PIL import Image

import mmvisattn  # registers the models; runtime() below
from mmvisattn.checkpoint import load_pretrained
from mmvisattn.models.backbones.rswatt import RSWAttTransformer
from mmvisattn.models.backbones.swin import SwinTransformer
from mmvisattn.models.backbones.tnt import TNT
from mmvisattn.models.layers import WindowAttention
from mmvisattn.ops import WindowLayout, use_backend
from mmvisattn.registry import MODELS

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
DEFAULT_BACKBONES = {
    'swin': dict(type='mmvisattn.SwinTransformer', arch='tiny'),
    'tnt': dict(type='mmvisattn.TNT', arch='small', out_type='cls_token'),
    'rswatt': dict(type='mmvisattn.RSWAttTransformer', arch='nano'),
}
CLASSES = {'swin': SwinTransformer, 'tnt': TNT, 'rswatt': RSWAttTransformer}
DPI = 80


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('image')
    parser.add_argument('--model', choices=sorted(CLASSES), required=True)
    parser.add_argument('--config', help="an mmdet/mmseg config: its "
                        'model.backbone is built instead of the default')
    parser.add_argument('--checkpoint', help='detector / segmentor '
                        'checkpoint or bare backbone state dict')
    parser.add_argument('--query', type=int, nargs=2, metavar=('X', 'Y'),
                        help='query pixel of the resized image (default: '
                        'its centre)')
    parser.add_argument('--stage', type=int, help='swin: stage (default 1); '
                        'rswatt: stage (default 0)')
    parser.add_argument('--block', type=int, help='block in the stage (swin: '
                        'default 1, a shifted one; rswatt: default 0) or, '
                        'tnt, of the model (default the last)')
    parser.add_argument('--size', type=int, nargs=2, default=(224, 224),
                        metavar=('H', 'W'))
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the random initialisation')
    parser.add_argument('--out-dir', required=True)
    return parser.parse_args(argv)


# --------------------------------------------------------------- inputs
def load_image(path: str, size: Tuple[int, int]
               ) -> Tuple[np.ndarray, torch.Tensor]:
    """RGB uint8 (H, W, 3) resized to ``size`` (H, W), and the normalised
    (1, 3, H, W) model input."""
    if not osp.isfile(path):
        raise ValueError(f'image: no file at {path!r}')
    rgb = mmcv.imresize(mmcv.imread(path, channel_order='rgb'),
                        (size[1], size[0]))
    x = (torch.from_numpy(rgb).float() - torch.tensor(MEAN)) / torch.tensor(
        STD)
    return rgb, x.permute(2, 0, 1)[None].contiguous()


def check_query(query: Optional[Sequence[int]],
                size: Tuple[int, int]) -> Tuple[int, int]:
    """The query pixel (x, y), the image centre by default."""
    H, W = size
    if query is None:
        return W // 2, H // 2
    x, y = query
    if not (0 <= x < W and 0 <= y < H):
        raise ValueError(f'--query {x} {y} is outside the {W}x{H} (width x '
                         'height) image')
    return x, y


def check_index(value: int, count: int, name: str) -> int:
    if not 0 <= value < count:
        raise ValueError(f'{name} {value} does not exist: choose 0..'
                         f'{count - 1}')
    return value


def build_backbone(model: str, config: Optional[str] = None,
                   checkpoint: Optional[str] = None
                   ) -> Tuple[torch.nn.Module, str]:
    """The backbone in eval mode and a label of its weights for titles.

    A config's ``Pretrained`` init counts as ``checkpoint``: every layout is
    loaded here, through the backbone's own converter where it has one.
    """
    if config is None:
        cfg = dict(DEFAULT_BACKBONES[model])
    else:
        if not osp.isfile(config):
            raise ValueError(f'--config: no file at {config!r}')
        cfg = Config.fromfile(config).get('model', {}).get('backbone')
        if cfg is None:
            raise ValueError(f'--config {config} has no model.backbone')
        cfg = cfg.to_dict()
    init_cfg = cfg.pop('init_cfg', None) or {}
    if checkpoint is None and init_cfg.get('type') == 'Pretrained':
        checkpoint = init_cfg['checkpoint']
    if checkpoint is not None and not osp.isfile(checkpoint):
        raise ValueError(f'--checkpoint: no file at {checkpoint!r}')
    backbone = MODELS.build(cfg)
    if not isinstance(backbone, CLASSES[model]):
        raise ValueError(f'--config {config}: its backbone is a '
                         f'{type(backbone).__name__}, not a '
                         f'{CLASSES[model].__name__} (--model {model})')
    backbone.init_weights()
    if checkpoint is None:
        return backbone.eval(), 'random init (untrained weights)'
    if isinstance(backbone, (SwinTransformer, TNT)):
        # their Pretrained init knows official, mmdet/mmseg/mmpretrain and
        # whole-detector layouts
        backbone.init_cfg = dict(type='Pretrained', checkpoint=checkpoint)
        backbone.init_weights()
    else:
        load_pretrained(backbone, checkpoint)
    return backbone.eval(), f'weights: {checkpoint}'


class _Captured(Exception):
    """Raised by the hook once every module has run: the rest of the
    forward is not needed."""


def capture_calls(model: torch.nn.Module, img: torch.Tensor,
                  modules: Sequence[torch.nn.Module]) -> list:
    """(positional inputs, output) of each of ``modules`` (first call) in
    ``model(img)``; forward hooks, so each module has run when it is read."""
    found = {}

    def hook(module, args, output):
        found.setdefault(id(module), (args, output))
        if len(found) == len(modules):
            raise _Captured

    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        # the plain path calls every attention's forward (the fast path's
        # fused residual add does not: ops.backend)
        with torch.no_grad(), use_backend('plain'):
            model(img)
    except _Captured:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if len(found) != len(modules):
        raise RuntimeError('an attention module did not run in the forward')
    return [found[id(m)] for m in modules]


def capture_inputs(model: torch.nn.Module, img: torch.Tensor,
                   modules: Sequence[torch.nn.Module]) -> list:
    """Positional inputs of each of ``modules`` (first call) in
    ``model(img)``."""
    return [args for args, _ in capture_calls(model, img, modules)]


# ----------------------------------------------------------------- Swin
class WindowProbs(NamedTuple):
    """Probabilities of one SwinAttention call, window slots as in
    ``layout`` (``v``: the values they weigh, ``mask``: additive or None)."""
    probs: torch.Tensor  # (B, num_windows, heads, N, N)
    v: torch.Tensor  # (B, num_windows, heads, N, d)
    layout: WindowLayout
    mask: Optional[torch.Tensor]  # (num_windows, N or 1, N)


def swin_window_probs(attn: torch.nn.Module, x: torch.Tensor) -> WindowProbs:
    """Recompute ``attn(x)``'s window attention probabilities (``x``: its
    (B, H, W, C) input) with its weights, as its forward does."""
    if not isinstance(attn, WindowAttention):
        raise ValueError(f'--config: attn_cfg type={type(attn).__name__}; '
                         'only WindowAttention has windows to show')
    probs, v, layout, mask = attn.window_probabilities(x)
    return WindowProbs(probs, v, layout, mask)


class QueryAttention(NamedTuple):
    """One query's attention over the stage's token map (H, W)."""
    weights: np.ndarray  # mean over heads; 0 outside the query's window
    window: np.ndarray  # bool: image tokens in the query's window slots
    allowed: np.ndarray  # bool: those the shift mask lets it attend
    padding_weight: float  # on zero-padded slots (map not whole windows)
    token: Tuple[int, int]  # the query's (row, col)
    stride: int  # image pixels per token
    window_size: int
    shift_size: int
    num_heads: int


def swin_stride(model: SwinTransformer, stage: int) -> int:
    return model.patch_embed.patch_size * 2**stage


@torch.no_grad()
def swin_query_attention(model: SwinTransformer, img: torch.Tensor,
                         query: Tuple[int, int], stage: int,
                         block: int) -> QueryAttention:
    """Attention of the token under pixel ``query`` (x, y) in ``block`` of
    ``stage`` (even: regular windows, odd: shifted), averaged over heads."""
    check_index(stage, len(model.layers), '--stage')
    blocks = model.layers[stage].blocks
    check_index(block, len(blocks), '--block')
    check_query(query, img.shape[-2:])
    attn = blocks[block].attn
    x = capture_inputs(model, img, [attn])[0][0]
    found = swin_window_probs(attn, x)
    shift_size = attn.shift_size
    H, W = x.shape[1:3]
    N = blocks[block].attn.window_tokens
    stride = swin_stride(model, stage)
    row, col = query[1] // stride, query[0] // stride
    slot = int(found.layout.scatter_index[row * W + col])
    win, n = divmod(slot, N)
    keys = found.layout.slot_to_image[win * N:(win + 1) * N]  # H*W: padding
    weights = torch.zeros(H * W + 1).index_add_(
        0, keys, found.probs[0, win, :, n].mean(0))
    allowed = torch.ones(N, dtype=torch.bool) if found.mask is None else \
        found.mask[win, n if found.mask.shape[1] > 1 else 0] == 0
    window, allowed_map = (torch.zeros(H * W + 1, dtype=torch.bool)
                           for _ in range(2))
    window[keys] = True
    allowed_map[keys[allowed]] = True
    return QueryAttention(
        weights[:-1].view(H, W).numpy(), window[:-1].view(H, W).numpy(),
        allowed_map[:-1].view(H, W).numpy(), float(weights[-1]), (row, col),
        stride, blocks[block].attn.window_size,
        shift_size if found.mask is not None else 0,  # shift_mode='none'
        blocks[block].attn.num_heads)


def _figure(rows: int, cols: int, figsize, **kwargs):
    """Subplots laid out around their titles, with room under the
    figure title."""
    fig, axes = plt.subplots(rows, cols, figsize=figsize, layout='constrained',
                             **kwargs)
    fig.get_layout_engine().set(h_pad=0.1)
    return fig, axes


def _show(ax, rgb: np.ndarray):
    """The image with pixel (row, col) covering [col, col + 1) x [row,
    row + 1), the convention of every box and heat map drawn on it."""
    ax.imshow(rgb, extent=(0, rgb.shape[1], rgb.shape[0], 0))


def _grid(ax, step: float, offset: float, width: int, height: int,
          **style):
    for x in np.arange(offset % step, width, step):
        ax.axvline(x, **style)
    for y in np.arange(offset % step, height, step):
        ax.axhline(y, **style)


def _strips(ax, starts, size, shift, labels=('A', 'B', 'C')):
    """Shade the corner (A), top (B) and left (C) strips that the cyclic
    shift moves, their top-left corners at ``starts`` = (corner, top strip,
    left strip) positions in pixels, Swin paper fig. 4."""
    (cx, cy), (tx, ty), (lx, ly) = starts
    W, H = size
    for (x, y, w, h), label, colour in zip(
            ((cx, cy, shift, shift), (tx, ty, W - shift, shift),
             (lx, ly, shift, H - shift)), labels,
            ('tab:red', 'tab:green', 'tab:blue')):
        ax.add_patch(mpatches.Rectangle((x, y), w, h, color=colour,
                                        alpha=0.35, lw=0))
        ax.text(x + w / 2, y + h / 2, label, color='white', ha='center',
                va='center', fontsize=11, weight='bold')


def plot_swin_windows(rgb: np.ndarray, model: SwinTransformer, stage: int,
                      title: str):
    """Regular partition, shifted partition, and the cyclic shift that
    computes the shifted one as regular windows with a mask (fig. 2, 4)."""
    H, W = rgb.shape[:2]
    stride = swin_stride(model, stage)
    ws = model.window_size
    if not isinstance(ws, int):
        raise ValueError(f'the window plot draws one square window for '
                         f'every stage, not {ws!r}')
    win, shift = ws * stride, (ws // 2) * stride
    # padded frame (whole windows) and the image rolled by -shift inside it
    fh = math.ceil(math.ceil(H / stride) / ws) * win
    fw = math.ceil(math.ceil(W / stride) / ws) * win
    frame = np.zeros((fh, fw, 3), np.uint8)
    frame[:H, :W] = rgb
    rolled = np.roll(frame, (-shift, -shift), axis=(0, 1))
    fig, axes = _figure(1, 3, figsize=(10.5, 4.1))
    style = dict(color='yellow', lw=1.5)
    _show(axes[0], frame)
    _grid(axes[0], win, 0, fw, fh, **style)
    axes[0].set_title(f'W-MSA: {ws}x{ws}-token windows ({win} px)')
    _show(axes[1], frame)
    _grid(axes[1], win, shift, fw, fh, **style)
    _strips(axes[1], ((0, 0), (shift, 0), (0, shift)), (fw, fh), shift)
    axes[1].set_title(f'SW-MSA: shifted by {ws // 2} tokens ({shift} px)')
    _show(axes[2], rolled)
    _grid(axes[2], win, 0, fw, fh, **style)
    _strips(axes[2], ((fw - shift, fh - shift), (0, fh - shift),
                      (fw - shift, 0)), (fw, fh), shift)
    axes[2].set_title('cyclic shift: regular windows,\nmasked across A/B/C',
                      fontsize=10)
    for ax in axes:
        ax.set_xlim(0, fw)
        ax.set_ylim(fh, 0)
        ax.axis('off')
    fig.suptitle(title)
    return fig


def _bbox(mask: np.ndarray) -> Tuple[int, int, int, int]:
    """(row0, col0, row1, col1) of the True cells, ends exclusive."""
    rows, cols = np.nonzero(mask)
    return rows.min(), cols.min(), rows.max() + 1, cols.max() + 1


def plot_swin_query(rgb: np.ndarray, att: QueryAttention, query, title):
    H, W = rgb.shape[:2]
    s = att.stride
    heat = np.ma.masked_where(~att.window, att.weights)
    r0, c0, r1, c1 = _bbox(att.allowed)
    fig, axes = _figure(1, 2, figsize=(9.5, 4.8))
    for ax, zoom in zip(axes, (False, True)):
        _show(ax, rgb)
        im = ax.imshow(heat, cmap='inferno', alpha=0.65,
                       interpolation='nearest',
                       extent=(0, heat.shape[1] * s, heat.shape[0] * s, 0))
        ax.add_patch(mpatches.Rectangle((c0 * s, r0 * s), (c1 - c0) * s,
                                        (r1 - r0) * s, fill=False,
                                        color='cyan', lw=2))
        ax.plot(query[0] + 0.5, query[1] + 0.5, marker='+', color='cyan',
                ms=12, mew=2)
        if zoom:
            pad = s
            ax.set_xlim(max(0, c0 * s - pad), min(W, c1 * s + pad))
            ax.set_ylim(min(H, r1 * s + pad), max(0, r0 * s - pad))
        else:
            ax.set_xlim(0, W)
            ax.set_ylim(H, 0)
        ax.axis('off')
    fig.colorbar(im, ax=axes[1], fraction=0.046, pad=0.04)
    kind = 'SW-MSA (shifted)' if att.shift_size else 'W-MSA'
    masked = int((att.window & ~att.allowed).sum())
    axes[0].set_title(f'query ({query[0]}, {query[1]}), {kind}')
    axes[1].set_title(f'its window (cyan: keys it may attend'
                      f'{f"; {masked} masked" if masked else ""})',
                      fontsize=10)
    fig.suptitle(title)
    return fig


# ------------------------------------------------------------------ TNT
class TNTAttention(NamedTuple):
    """Attention maps of one TNT block, each averaged over heads."""
    inner: np.ndarray  # (s, s): the query word over its sentence's words
    outer: np.ndarray  # (rows, cols): the query sentence over sentences
    outer_to_cls: float  # ... and its weight on the class token
    cls: Optional[np.ndarray]  # (rows, cols): class token over sentences
    cls_self: float  # the class token's weight on itself
    sentence: Tuple[int, int]  # (row, col) of the query's sentence
    word: Tuple[int, int]  # (row, col) of the query's word in it
    patch_size: int


@torch.no_grad()
def tnt_attention(model: TNT, img: torch.Tensor, query: Tuple[int, int],
                  block: Optional[int] = None) -> TNTAttention:
    """Inner, outer and class-token attention of ``block`` (default: the
    last) for the sentence and word under pixel ``query`` (x, y)."""
    block = len(model.blocks) - 1 if block is None else block
    check_index(block, len(model.blocks), '--block')
    check_query(query, img.shape[-2:])
    blk = model.blocks[block]
    (words, ), (sentences, ) = capture_inputs(model, img,
                                              [blk.inner.attn, blk.outer.attn])
    p, side = model.patch_size, model.words_per_side
    rows, cols = (math.ceil(length / p) for length in img.shape[-2:])
    prefix = model.num_prefix
    sentence = (query[1] // p, query[0] // p)
    word = (query[1] % p // (p // side), query[0] % p // (p // side))
    n = sentence[0] * cols + sentence[1]
    inner = blk.inner.attn.probabilities(words)[n, :,
                                                  word[0] * side + word[1]]
    inner = inner.mean(0)
    outer = blk.outer.attn.probabilities(sentences)[0].mean(0)
    cls = outer[0, prefix:].view(rows, cols).numpy() if prefix else None
    return TNTAttention(
        inner.view(side, side).numpy(),
        outer[prefix + n, prefix:].view(rows, cols).numpy(),
        float(outer[prefix + n, :prefix].sum()), cls,
        float(outer[0, 0]) if prefix else 0., sentence, word, p)


def plot_tnt(rgb: np.ndarray, att: TNTAttention, block: int, title: str):
    H, W = rgb.shape[:2]
    p = att.patch_size
    side = att.inner.shape[0]
    fig, axes = _figure(1, 3, figsize=(12.5, 4.6))
    r, c = att.sentence
    # inner: the query's sentence (patch), its words' attention on it
    ax = axes[0]
    _show(ax, rgb)
    ax.imshow(att.inner, cmap='inferno', alpha=0.6, interpolation='nearest',
              extent=(c * p, (c + 1) * p, (r + 1) * p, r * p))
    edges = np.linspace(0, p, side + 1)
    ax.vlines(c * p + edges, r * p, (r + 1) * p, color='white', lw=0.5)
    ax.hlines(r * p + edges, c * p, (c + 1) * p, color='white', lw=0.5)
    wy, wx = att.word
    ax.add_patch(mpatches.Rectangle((c * p + wx * p / side,
                                     r * p + wy * p / side), p / side,
                                    p / side, fill=False, color='cyan',
                                    lw=2))
    ax.set_xlim(c * p, (c + 1) * p)
    ax.set_ylim((r + 1) * p, r * p)
    ax.set_title(f'inner: word ({wy},{wx}) over the {side}x{side} words\n'
                 f'of sentence ({r},{c})', fontsize=10)
    panels = [(axes[1], att.outer, f'outer: sentence ({r},{c}) over '
               f'sentences\n(+{att.outer_to_cls:.3f} on the class token)')]
    if att.cls is not None:
        panels.append((axes[2], att.cls, 'class token over sentences\n'
                       f'(+{att.cls_self:.3f} on itself)'))
    else:
        axes[2].text(0.5, 0.5, 'no class token', ha='center',
                     transform=axes[2].transAxes)
    for ax, heat, name in panels:
        _show(ax, rgb)
        ax.imshow(heat, cmap='inferno', alpha=0.6, interpolation='nearest',
                  extent=(0, heat.shape[1] * p, heat.shape[0] * p, 0))
        ax.set_xlim(0, W)
        ax.set_ylim(H, 0)
        ax.set_title(name, fontsize=10)
    axes[1].add_patch(mpatches.Rectangle((c * p, r * p), p, p, fill=False,
                                         color='cyan', lw=2))
    for ax in axes:
        ax.axis('off')
    fig.suptitle(f'{title}, block {block}')
    return fig


# --------------------------------------------------------------- RSWAtt
class RSWAttExtents(NamedTuple):
    extents: np.ndarray  # (H, W, scales, 4) left, right, top, bottom, tokens
    limits: np.ndarray  # (scales, 4) the largest extents of each scale
    scale_windows: Tuple[int, ...]
    stride: int  # image pixels per token


@torch.no_grad()
def rswatt_extents(model: RSWAttTransformer, img: torch.Tensor, stage: int,
                   block: int) -> RSWAttExtents:
    """The window extents ``block`` of ``stage`` predicts for ``img`` (the
    ``extents`` of the layer's :class:`RSWAttOutput`)."""
    check_index(stage, len(model.layers), '--stage')
    check_index(block, len(model.layers[stage].blocks), '--block')
    attn = model.layers[stage].blocks[block].attn
    if attn.window_pred is None:
        raise ValueError('--config: the layer predicts no windows '
                         '(window_predictor=None)')
    (_, output), = capture_calls(model, img, [attn])
    return RSWAttExtents(output.extents[0].numpy(),
                         attn.window_pred.extent_limits.numpy(),
                         attn.scale_windows,
                         model.patch_embed.patch_size * 2**stage)


def extent_boxes(extents: np.ndarray, stride: int) -> np.ndarray:
    """(H, W, ..., 4) extents in tokens -> pixel boxes x0, y0, x1, y1 of
    each query's window, where the soft membership crosses 1/2."""
    H, W = extents.shape[:2]
    shape = (H, W) + (1, ) * (extents.ndim - 3)
    row = np.arange(H).reshape((H, 1) + shape[2:])
    col = np.arange(W).reshape((1, W) + shape[2:])
    left, right, top, bottom = np.moveaxis(extents, -1, 0)
    return np.stack([(col - left) * stride, (row - top) * stride,
                     (col + right + 1) * stride,
                     (row + bottom + 1) * stride], -1)


def plot_rswatt(rgb: np.ndarray, found: RSWAttExtents, stage: int,
                block: int, title: str):
    H, W = rgb.shape[:2]
    h, w = found.extents.shape[:2]
    s = found.stride
    boxes = extent_boxes(found.extents, s)
    step = max(1, round(min(h, w) / 6))
    picks = [(r, c) for r in range(step // 2, h, step)
             for c in range(step // 2, w, step)]
    scales = len(found.scale_windows)
    fig, axes = _figure(scales, 2, figsize=(7.5, 3.6 * scales),
                        squeeze=False)
    colours = plt.cm.tab10(np.arange(len(picks)) % 10)
    for i, m in enumerate(found.scale_windows):
        ax = axes[i][0]
        _show(ax, rgb)
        for (r, c), colour in zip(picks, colours):
            x0, y0, x1, y1 = boxes[r, c, i]
            ax.add_patch(mpatches.Rectangle((x0, y0), x1 - x0, y1 - y0,
                                            fill=False, color=colour, lw=1.5))
            ax.plot((c + 0.5) * s, (r + 0.5) * s, '.', color=colour)
        ax.set_xlim(0, W)
        ax.set_ylim(H, 0)
        ax.set_title(f'largest window {m}: predicted windows', fontsize=10)
        ext = found.extents[..., i, :]
        area = (ext[..., 0] + ext[..., 1] + 1) * (ext[..., 2] + ext[..., 3] +
                                                  1) / m**2
        ax = axes[i][1]
        im = ax.imshow(area, cmap='viridis', vmin=0, vmax=1,
                       interpolation='nearest', extent=(0, w * s, h * s, 0))
        ax.set_xlim(0, W)
        ax.set_ylim(H, 0)
        ax.set_title(f'window area / {m}x{m} (mean {area.mean():.2f})',
                     fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    for ax in axes.flat:
        ax.axis('off')
    note = ''
    if np.ptp(found.extents, axis=(0, 1)).max() == 0:
        note = ' (every query predicts the same window)'
    fig.suptitle(f'{title}\nstage {stage} block {block}, stride {s} px{note}')
    return fig


# ----------------------------------------------------------------- main
def _save(fig, out_dir: str, name: str) -> str:
    """PNG with a 256-colour palette: the demo images' pixel noise makes
    full-colour PNGs several times larger."""
    path = osp.join(out_dir, name)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=DPI)
    plt.close(fig)
    Image.open(buf).convert('RGB').quantize(
        256, method=Image.Quantize.FASTOCTREE,
        dither=Image.Dither.NONE).save(path, optimize=True)
    return path


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    if not MMLogger.check_instance_created('visualize_attention'):
        # quiet: init_weights reports every tensor at INFO
        MMLogger.get_instance('visualize_attention', log_level='WARNING')
    size = tuple(args.size)
    if min(size) < 1:
        raise ValueError(f'--size {size[0]} {size[1]} must be positive')
    rgb, img = load_image(args.image, size)
    query = check_query(args.query, size)
    if args.model == 'tnt' and args.stage is not None:
        raise ValueError('--stage: TNT has no stages; choose a --block')
    torch.manual_seed(args.seed)
    model, weights = build_backbone(args.model, args.config, args.checkpoint)
    os.makedirs(args.out_dir, exist_ok=True)
    name = osp.basename(args.config) if args.config else \
        type(model).__name__
    title = f'{name}, {weights}'
    written = []
    if args.model == 'swin':
        stage = 1 if args.stage is None else args.stage
        block = 1 if args.block is None else args.block
        att = swin_query_attention(model, img, query, stage, block)
        written.append(_save(
            plot_swin_windows(rgb, model, stage, f'{title}\nstage {stage}'),
            args.out_dir, 'swin_windows.png'))
        written.append(_save(
            plot_swin_query(rgb, att, query, f'{title}\nstage {stage} block '
                            f'{block}, mean over {att.num_heads} heads'),
            args.out_dir, 'swin_query_attention.png'))
    elif args.model == 'tnt':
        block = len(model.blocks) - 1 if args.block is None else args.block
        att = tnt_attention(model, img, query, block)
        written.append(_save(plot_tnt(rgb, att, block, title), args.out_dir,
                             'tnt_attention.png'))
    else:
        stage = 0 if args.stage is None else args.stage
        block = 0 if args.block is None else args.block
        found = rswatt_extents(model, img, stage, block)
        written.append(_save(plot_rswatt(rgb, found, stage, block, title),
                             args.out_dir, 'rswatt_windows.png'))
    for path in written:
        print(path)
    return written


if __name__ == '__main__':
    main()
