"""Export an mmdet detector or an mmseg segmentor to ONNX, up to its tensor
outputs, and check the result under onnxruntime against PyTorch on a real
image.

    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT --shape H W \\
        --image IMG [--out FILE.onnx] [--exporter torchscript|dynamo]

What is exported (post-processing, NMS included, stays in mmdet/mmseg):
  segmentor            image -> the decode head's logits (``_forward``)
  one-stage detector   image -> the head's raw outputs (``_forward``)
  two-stage detector   two graphs around the proposal NMS:
      FILE.onnx        image -> the neck's features and the RPN head's raw
                       outputs
      FILE_roi.onnx    features + ``rois`` (P, 5) -> the RoI heads' outputs
                       (every cascade stage's scores and boxes, the merged
                       masks) for P proposals; P = the RPN's
                       ``test_cfg.rpn.max_per_img``; pad fewer proposals with
                       zero rows and drop their outputs.
The input size is fixed (``--shape``, the image is resized to it): the graph
refuses another size. Every output's max |onnxruntime - PyTorch| is printed,
and the exit status is 1 when one exceeds ``--atol``. docs/deployment.md
says what was measured.
"""
import argparse
import contextlib
import os
import os.path as osp
import sys
import warnings

import numpy as np
import torch
from mmengine.config import DictAction
from torch import nn

import mmvisattn
from mmvisattn.cli import config_scope


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--shape', nargs=2, type=int, required=True,
                        metavar=('H', 'W'),
                        help='input height and width (multiples of 32)')
    parser.add_argument('--image', required=True,
                        help='the image PyTorch and onnxruntime are compared '
                        'on')
    parser.add_argument('--out', help='ONNX file (default: end2end.onnx '
                        'beside the checkpoint)')
    parser.add_argument('--exporter', choices=['torchscript', 'dynamo'],
                        default='torchscript',
                        help="torch.onnx.export(dynamo=False) (mmdeploy's) "
                        'or dynamo=True')
    parser.add_argument('--opset', type=int, default=17)
    parser.add_argument('--atol', type=float, default=1e-3,
                        help='exit 1 when an output differs by more')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, key=value')
    return parser.parse_args(argv)


def build_model(config_path, checkpoint, cfg_options=None):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.runner import load_checkpoint

    cfg = Config.fromfile(config_path)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    scope = config_scope(cfg, config_path)
    if scope not in ('mmdet', 'mmseg'):
        raise SystemExit(f'{config_path}: default_scope={scope!r}; this tool '
                         "exports mmdet and mmseg models")
    init_default_scope(scope)
    import mmvisattn  # noqa: F401  (registers the backbones)
    if scope == 'mmdet':
        from mmdet.registry import MODELS
    else:
        from mmseg.registry import MODELS
    cfg.model.pop('pretrained', None)
    if cfg.model.get('backbone', {}).get('init_cfg') is not None:
        cfg.model.backbone.init_cfg = None  # the checkpoint holds it all
    model = MODELS.build(cfg.model)
    if not osp.isfile(checkpoint):
        raise SystemExit(f'checkpoint not found: {checkpoint}')
    load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    return cfg, scope, model.eval()


def load_inputs(model, scope, image_path, shape):
    """The image resized to ``shape`` and normalised by the model's own data
    preprocessor, and the data sample that describes it."""
    import mmcv
    if not osp.isfile(image_path):
        raise SystemExit(f'image not found: {image_path}')
    h, w = shape
    if h % 32 or w % 32:
        raise SystemExit(f'--shape {h} {w}: height and width must be '
                         'multiples of 32 (the backbones downsample by 32)')
    img = mmcv.imresize(mmcv.imread(image_path), (w, h))
    meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w),
                batch_input_shape=(h, w), scale_factor=(1., 1.))
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample as Sample
    else:
        from mmseg.structures import SegDataSample as Sample
    sample = Sample(metainfo=meta)
    data = model.data_preprocessor(
        dict(inputs=[torch.from_numpy(img).permute(2, 0, 1).contiguous()],
             data_samples=[sample]), False)
    return data['inputs'], data['data_samples']


def flatten(outputs):
    """Nested tuples/lists of tensors -> a flat tuple (ONNX outputs)."""
    if isinstance(outputs, torch.Tensor):
        return (outputs, )
    return tuple(t for item in outputs for t in flatten(item))


class Network(nn.Module):
    """``model._forward``: image -> the heads' raw outputs (segmentors,
    one-stage detectors)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, inputs):
        return flatten(self.model._forward(inputs))


class FeaturesAndProposalScores(nn.Module):
    """Two-stage detectors, first graph: image -> neck features, RPN head's
    class scores and box deltas per level."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, inputs):
        feats = self.model.extract_feat(inputs)
        return (*feats, *flatten(self.model.rpn_head(feats)))


class RoIHeads(nn.Module):
    """Two-stage detectors, second graph: neck features and ``rois`` (P, 5:
    batch index, x1, y1, x2, y2) -> the RoI heads' ``forward`` outputs."""

    def __init__(self, model, data_samples):
        super().__init__()
        self.model = model
        self.data_samples = data_samples

    def forward(self, *feats_and_rois):
        from mmengine.structures import InstanceData
        *feats, rois = feats_and_rois
        proposals = [InstanceData(bboxes=rois[:, 1:])]
        return flatten(
            self.model.roi_head.forward(tuple(feats), proposals,
                                        self.data_samples))


@contextlib.contextmanager
def onnx_roi_align(opset):
    """mmcv's RoIAlign written as ONNX's RoiAlign, right or refused.

    mmcv 2.1's own symbolic is wrong both ways here (measured with
    onnxruntime against mmcv's op): at opset >= 13 the graph is invalid
    (``Squeeze`` with an ``axes`` attribute), and below opset 16, where
    ONNX's RoiAlign has no half-pixel mode and stretches every roi to at
    least one cell, ``aligned=True`` (every mmdet RoI extractor) differs by
    up to 1.6 on small rois. From opset 16 ONNX states the mode:
    'half_pixel' is mmcv's ``aligned=True``, 'output_half_pixel' its
    ``aligned=False`` (both equal to mmcv's op); a model with RoIAlign is
    refused below opset 16."""
    from mmcv.ops.roi_align import RoIAlignFunction

    def symbolic(g, input, rois, output_size, spatial_scale, sampling_ratio,
                 pool_mode, aligned):
        if opset < 16:
            raise SystemExit(
                f'--opset {opset}: mmcv RoIAlign has no ONNX equivalent '
                'before opset 16 (RoiAlign without '
                'coordinate_transformation_mode); use --opset 16 or later')
        index = g.op('Constant', value_t=torch.tensor([0]))
        batch = g.op('Cast', g.op('Squeeze', g.op('Gather', rois, index,
                                                  axis_i=1),
                                  g.op('Constant',
                                       value_t=torch.tensor([1]))),
                     to_i=7)  # int64
        boxes = g.op('Gather', rois,
                     g.op('Constant', value_t=torch.tensor([1, 2, 3, 4])),
                     axis_i=1)
        return g.op('RoiAlign', input, boxes, batch,
                    coordinate_transformation_mode_s='half_pixel'
                    if aligned else 'output_half_pixel',
                    output_height_i=output_size[0],
                    output_width_i=output_size[1],
                    spatial_scale_f=spatial_scale,
                    sampling_ratio_i=max(0, sampling_ratio),
                    mode_s=pool_mode)

    original = RoIAlignFunction.__dict__['symbolic']
    RoIAlignFunction.symbolic = staticmethod(symbolic)
    try:
        yield
    finally:
        RoIAlignFunction.symbolic = original


@contextlib.contextmanager
def eager_box_decoding():
    """mmdet's ``DeltaXYWHBBoxCoder.decode`` takes its ONNX branch whenever
    an export runs, and that branch imports ``mmdet.core``, which mmdet 3.x
    no longer has (ModuleNotFoundError). Single-image decoding (2-D deltas,
    all the RoI heads use) keeps mmdet's eager ``delta2bbox`` while
    exporting: the same function PyTorch runs, traced."""
    from mmdet.models.task_modules.coders import delta_xywh_bbox_coder as dx
    from mmdet.structures.bbox import HorizontalBoxes, get_box_tensor
    original = dx.DeltaXYWHBBoxCoder.decode

    def decode(self, bboxes, pred_bboxes, max_shape=None,
               wh_ratio_clip=16 / 1000):
        if pred_bboxes.ndim != 2:
            return original(self, bboxes, pred_bboxes, max_shape,
                            wh_ratio_clip)
        decoded = dx.delta2bbox(get_box_tensor(bboxes), pred_bboxes,
                                self.means, self.stds, max_shape,
                                wh_ratio_clip, self.clip_border,
                                self.add_ctr_clamp, self.ctr_clamp)
        return HorizontalBoxes(decoded) if self.use_box_type else decoded

    dx.DeltaXYWHBBoxCoder.decode = decode
    try:
        yield
    finally:
        dx.DeltaXYWHBBoxCoder.decode = original


class SlicedAdaptiveAvgPool(nn.Module):
    """``nn.AdaptiveAvgPool2d`` for one known input size, as means over
    static slices (the same windows: start ``floor(i * n / out)``, end
    ``ceil((i + 1) * n / out)``). The TorchScript exporter converts adaptive
    pooling only when it can read the input size from the graph, and the
    backbones' outputs carry sizes computed in the graph (they export with
    any size)."""

    def __init__(self, output_size, input_size):
        super().__init__()
        self.rows = self.windows(input_size[0], output_size[0])
        self.cols = self.windows(input_size[1], output_size[1])

    @staticmethod
    def windows(n, out):
        return [(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]

    def forward(self, x):
        rows = [
            torch.cat([
                x[:, :, r0:r1, c0:c1].mean((2, 3), keepdim=True)
                for c0, c1 in self.cols
            ], 3) for r0, r1 in self.rows
        ]
        return torch.cat(rows, 2)


@contextlib.contextmanager
def static_adaptive_pools(model, args):
    """Swap every ``nn.AdaptiveAvgPool2d`` of ``model`` (UperNet's pyramid
    pooling) for :class:`SlicedAdaptiveAvgPool` at the size it sees on
    ``args`` while exporting; the export is then for that size only."""
    pools = {name: m for name, m in model.named_modules()
             if isinstance(m, nn.AdaptiveAvgPool2d)}
    if not pools:  # nothing to swap: no forward to record sizes
        yield
        return
    sizes = {}

    def record(name):
        def hook(module, inputs):
            sizes.setdefault(name, tuple(inputs[0].shape[-2:]))
        return hook

    hooks = [m.register_forward_pre_hook(record(name))
             for name, m in pools.items()]
    with torch.no_grad():
        model(*args)
    for hook in hooks:
        hook.remove()
    swapped = []
    for name, pool in pools.items():
        parent_name, _, child = name.rpartition('.')
        parent = model.get_submodule(parent_name)
        out = pool.output_size
        out = (out, out) if isinstance(out, int) else tuple(out)
        if None in out:
            raise SystemExit(f'{name}: AdaptiveAvgPool2d with output size '
                             f'{pool.output_size} is not supported')
        setattr(parent, child, SlicedAdaptiveAvgPool(out, sizes[name]))
        swapped.append((parent, child, pool))
    try:
        yield
    finally:
        for parent, child, pool in swapped:
            setattr(parent, child, pool)


def export(module, args, path, exporter, opset, names):
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        if exporter == 'torchscript':
            with onnx_roi_align(opset), eager_box_decoding(), \
                    static_adaptive_pools(module, args):
                torch.onnx.export(module, args, path, opset_version=opset,
                                  dynamo=False, input_names=names,
                                  do_constant_folding=True)
        else:
            try:
                with eager_box_decoding():
                    program = torch.onnx.export(module, args, dynamo=True,
                                                opset_version=max(opset, 18),
                                                input_names=names,
                                                verbose=False)
            except Exception as e:  # the exporter's own report is long
                text = str(e)
                summary = text.split('## Exception summary')[-1].strip() \
                    if '## Exception summary' in text else \
                    text.splitlines()[0]
                raise SystemExit(
                    f'the dynamo exporter failed on {type(module).__name__}:'
                    f' {summary.splitlines()[0]}\n'
                    'use --exporter torchscript (the default)') from None
            program.save(path)


def compare(path, module, args, names, label):
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    # inputs the graph does not read are pruned from it (the RoI heads do
    # not read the neck's coarsest level)
    wanted = {i.name for i in session.get_inputs()}
    feed = {name: arg.numpy() for name, arg in zip(names, args)
            if name in wanted}
    onnx_outputs = session.run(None, feed)
    with torch.no_grad():
        torch_outputs = module(*args)
    if len(onnx_outputs) != len(torch_outputs):
        raise SystemExit(f'{label}: {len(onnx_outputs)} ONNX outputs, '
                         f'{len(torch_outputs)} in PyTorch')
    worst = 0.
    print(f'{label}: {path}')
    for i, (o, t) in enumerate(zip(onnx_outputs, torch_outputs)):
        t = t.float().numpy()
        diff = float(np.abs(o - t).max()) if t.size else 0.
        scale = float(np.abs(t).max()) if t.size else 0.
        worst = max(worst, diff)
        print(f'  output {i:2d} {str(tuple(t.shape)):22s} '
              f'max |onnx - torch| {diff:.2e}  (max |torch| {scale:.2e})')
    print(f'  {label}: max |onnxruntime - PyTorch| over '
          f'{len(torch_outputs)} outputs: {worst:.2e}')
    return worst


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    cfg, scope, model = build_model(args.config, args.checkpoint,
                                    args.cfg_options)
    inputs, samples = load_inputs(model, scope, args.image, args.shape)
    out = args.out or osp.join(osp.dirname(osp.abspath(args.checkpoint)),
                               'end2end.onnx')
    two_stage = scope == 'mmdet' and getattr(model, 'with_rpn', False)
    print(f'{args.config} ({type(model).__name__}), input '
          f'{tuple(inputs.shape)}, {args.exporter} exporter, opset '
          f'{args.opset}, image {args.image}')
    if not two_stage:
        network = Network(model).eval()
        export(network, (inputs, ), out, args.exporter, args.opset,
               ['images'])
        worst = compare(out, network, (inputs, ), ['images'], 'network')
    else:
        first = FeaturesAndProposalScores(model).eval()
        export(first, (inputs, ), out, args.exporter, args.opset, ['images'])
        worst = compare(out, first, (inputs, ), ['images'],
                        'features and RPN')
        # the proposals PyTorch's RPN gives on this image, padded to P rows
        with torch.no_grad():
            feats = model.extract_feat(inputs)
            proposals = model.rpn_head.predict(feats, samples,
                                               rescale=False)[0].bboxes
        count = cfg.model.test_cfg.rpn.max_per_img
        rois = proposals.new_zeros(count, 5)
        rois[:len(proposals), 1:] = proposals[:count]
        second = RoIHeads(model, samples).eval()
        roi_out = osp.splitext(out)[0] + '_roi.onnx'
        names = [f'feat{i}' for i in range(len(feats))] + ['rois']
        export(second, (*feats, rois), roi_out, args.exporter, args.opset,
               names)
        print(f'({len(proposals)} proposals from PyTorch\'s RPN, padded to '
              f'{count})')
        worst = max(worst, compare(roi_out, second, (*feats, rois), names,
                                   'RoI heads'))
    verdict = 'within' if worst <= args.atol else 'EXCEEDS'
    print(f'max |onnxruntime - PyTorch|: {worst:.2e} ({verdict} --atol '
          f'{args.atol:g})')
    return 0 if worst <= args.atol else 1


if __name__ == '__main__':
    sys.exit(main())
