"""Parameter and FLOP counting for classifiers, detectors and segmentors.

Conventions (all count one multiply-add as one FLOP):

* ``'fvcore'`` -- mmengine's ``FlopAnalyzer`` (fvcore's jit-trace counter)
  plus a handle for ``aten::scaled_dot_product_attention``, the fused kernel
  our window attention runs on (mmengine has none and would silently skip
  QK^T and AV). Every matmul is counted, attention included. This is how the
  paper's classification figures (Table 1: Swin-T 4.5G at 224) are counted
  (:func:`get_complexity`).

* ``'mmcv1'`` -- the module-hook counter of mmcv 1.x
  (``mmcv.cnn.get_model_complexity_info``, still shipped by mmcv 2.x; its
  hook table is reused here), which mmdet 2.x's and mmseg 0.x's
  ``get_flops.py`` ran. Only modules of the exact types in mmcv's table are
  counted: convolutions (bias included), ``nn.Linear`` (bias excluded),
  norms (BN/GN/LN/IN: numel, x2 when affine), ReLU-family activations,
  pooling, ``nn.Upsample`` and transposed convolutions. Anything functional
  is free: attention's QK^T and AV, softmax, GELU, ``F.interpolate``,
  RoIAlign, ``torch.bmm``. Parameters: the trainable ones, as mmcv counts.

* ``'paper'`` -- ``'mmcv1'`` plus the attention matmuls (QK^T + AV, on the
  padded window grid) made inside the backbone and inside every RSWAtt
  attention elsewhere (RSWAttNeck, the RSWAtt decode heads: no paper
  figure covers them; :func:`attention_scopes`), and deformable convolutions
  (mmcv's ``DeformConv2d``, absent from mmcv's table) counted as ordinary
  convolutions of their kernel: RepPoints v2's two per level, without which
  its Table 2 FLOPs fall short by about 25G at 1280x800. This reproduces
  the paper's detection and segmentation figures (Tables 2 and 3) to <1%: pure
  ``'mmcv1'`` falls short by exactly those matmuls (Swin-T 3.1G, Swin-S
  5.2G, Swin-B 7.0G at 1280x800), while R-50 models match either way and
  the heads' matmuls (Sparse R-CNN's dynamic convs and self-attention) must
  stay uncounted to match.

The detector/segmentor forward counted is the *dummy forward* of mmdet 2.x /
mmseg 0.x (``forward_dummy``), re-created on the mmdet 3.x / mmseg 1.x
modules by :func:`dummy_forward`:

* single-stage detectors: backbone, neck, ``bbox_head(x)``;
* two-stage / cascade / HTC: backbone, neck, ``rpn_head(x)``, then every
  stage's box branch on 1000 random proposals and every stage's mask branch
  on the first 100 of them (HTC: semantic head first, mask heads chained by
  the mask information flow);
* Sparse R-CNN / QueryInst-like (``SparseRoIHead``): the learned proposals
  (``num_proposals`` of them) through every stage;
* segmentors: backbone, neck, ``decode_head`` (no auxiliary head).

mmdet 3.x's own ``mode='tensor'`` (``_forward``) differs for two-stage
detectors: it post-processes the RPN output and sends the real proposals
(up to 1000 after NMS) to the mask heads too, which for Cascade Mask R-CNN
Swin-T gives 2178G instead of 745G (mask branch 1592G instead of 159G).
"""
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from torch.overrides import TorchFunctionMode

from mmvisattn.models.layers import PackedLinear
from mmvisattn.ops import use_backend
from mmvisattn.utils.optional import mmcv_ops_available

# mmdet 2.x forward_dummy: box branch on 1000 random proposals, mask branch
# on the first 100 of them.
NUM_DUMMY_PROPOSALS = 1000
NUM_DUMMY_MASK_ROIS = 100
CONVENTIONS = ('paper', 'mmcv1', 'fvcore')


def sdpa_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """QK^T (L x S x E) plus AV (L x S x Ev) per batch-head."""
    q_shape, k_shape, v_shape = (get_shape(v) for v in inputs[:3])
    *batch, L, E = q_shape
    S, Ev = k_shape[-2], v_shape[-1]
    n = 1
    for b in batch:
        n *= b
    return n * L * S * (E + Ev)


def get_complexity(model: nn.Module,
                   input_shape: Sequence[int]) -> Dict[str, float]:
    """FLOPs (multiply-adds) and parameters for one input of ``input_shape``.

    fvcore convention (all matmuls); ``model(x)`` is what is counted.
    """
    model.eval()  # not chained: some backbones' train() returns None
    inputs = (torch.randn(1, *input_shape), )
    analyzer = _flop_analyzer(model, inputs)
    with torch.no_grad():
        flops = analyzer.total()
    return dict(flops=float(flops), params=float(parameter_count(model)['']))


def _flop_analyzer(model: nn.Module, inputs: tuple) -> FlopAnalyzer:
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle('aten::scaled_dot_product_attention', sdpa_flop_jit)
    analyzer.unsupported_ops_warnings(False)
    analyzer.uncalled_modules_warnings(False)
    return analyzer


# --------------------------------------------------------------- dummy runs
def _img_meta(img: torch.Tensor) -> dict:
    h, w = img.shape[-2:]
    return dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w),
                batch_input_shape=(h, w), scale_factor=(1., 1.))


def _random_proposals(num: int, img: torch.Tensor) -> torch.Tensor:
    """``num`` small valid boxes (x1, y1, x2, y2) inside the image.

    mmdet 2.x used ``torch.randn(num, 4)``; only the number of boxes matters
    for the count (RoIAlign is not counted). Valid boxes keep the RoI level
    mapping defined, small ones keep RoIAlign's adaptive sampling cheap.
    """
    h, w = img.shape[-2:]
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(num, 2, generator=g) * torch.tensor([w, h]) * 0.9
    wh = torch.rand(num, 2, generator=g) * 24 + 8
    return torch.cat([xy, xy + wh], 1).to(img.device, img.dtype)


def _valid_boxes(boxes: torch.Tensor) -> torch.Tensor:
    """Corners sorted and at least one pixel apart: RoIAlign refuses boxes
    of negative size, which untrained (randomly initialised) heads make."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack([torch.minimum(x1, x2), torch.minimum(y1, y2),
                        torch.maximum(x1, x2) + 1,
                        torch.maximum(y1, y2) + 1], -1)


def _flat_tensors(out: Any) -> Tuple[torch.Tensor, ...]:
    """All tensors in a nested output, for jit tracing."""
    if isinstance(out, torch.Tensor):
        return (out, )
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return tuple(t for o in out for t in _flat_tensors(o))
    return ()


def _roi_dummy(roi_head: nn.Module, x: Tuple[torch.Tensor, ...],
               img: torch.Tensor) -> tuple:
    """mmdet 2.x ``roi_head.forward_dummy(x, 1000 random proposals)``."""
    from mmdet.models.roi_heads import (
        CascadeRoIHead,
        HybridTaskCascadeRoIHead,
        StandardRoIHead,
    )
    from mmdet.structures.bbox import bbox2roi
    rois = bbox2roi([_random_proposals(NUM_DUMMY_PROPOSALS, img)])
    mask_rois = rois[:NUM_DUMMY_MASK_ROIS]
    outs = []
    if isinstance(roi_head, HybridTaskCascadeRoIHead):
        semantic_feat = roi_head.semantic_head(x)[1] \
            if roi_head.with_semantic else None
        for stage in range(roi_head.num_stages):
            outs.append(roi_head._bbox_forward(
                stage, x, rois, semantic_feat=semantic_feat))
        if roi_head.with_mask:
            # last stage's RoI extractor, all mask heads chained
            outs.append(roi_head._mask_forward(
                -1, x, mask_rois, semantic_feat=semantic_feat,
                training=False))
    elif isinstance(roi_head, CascadeRoIHead):
        if roi_head.with_bbox:
            for stage in range(roi_head.num_stages):
                outs.append(roi_head._bbox_forward(stage, x, rois))
        if roi_head.with_mask:
            for stage in range(roi_head.num_stages):
                outs.append(roi_head._mask_forward(stage, x, mask_rois))
    elif isinstance(roi_head, StandardRoIHead):
        if roi_head.with_bbox:
            outs.append(roi_head._bbox_forward(x, rois))
        if roi_head.with_mask:
            outs.append(roi_head._mask_forward(x, mask_rois))
    else:
        raise NotImplementedError(
            f'no dummy forward for {type(roi_head).__name__}')
    return outs


def _detector_dummy(model: nn.Module, img: torch.Tensor) -> tuple:
    from mmdet.models.detectors import SingleStageDetector, TwoStageDetector
    from mmdet.models.roi_heads import SparseRoIHead
    from mmdet.structures import DetDataSample
    from mmdet.structures.bbox import bbox2roi
    data_samples = [DetDataSample(metainfo=_img_meta(img))]
    if isinstance(model, SingleStageDetector):
        x = model.extract_feat(img)
        return model.bbox_head(x)
    if not isinstance(model, TwoStageDetector):
        # DETR-like and others: mmdet 3.x's tensor mode
        return model._forward(img, data_samples)
    x = model.extract_feat(img)
    roi_head = model.roi_head
    if isinstance(roi_head, SparseRoIHead):
        # learned proposals through every stage (mmdet 2.x SparseRCNN)
        metas = [s.metainfo for s in data_samples]
        results = model.rpn_head.predict(x, data_samples)
        proposals = [_valid_boxes(r.bboxes) for r in results]
        object_feats = torch.cat([r.features[None] for r in results])
        outs = []
        for stage in range(roi_head.num_stages):
            res = roi_head._bbox_forward(stage, x, bbox2roi(proposals),
                                         object_feats, metas)
            object_feats = res['object_feats']
            proposals = [_valid_boxes(p) for p in res['detached_proposals']]
            outs.append(res['cls_score'])
            outs.append(res['decoded_bboxes'])
        return outs
    outs = [model.rpn_head(x)] if model.with_rpn else []
    return outs + _roi_dummy(roi_head, x, img)


def _segmentor_dummy(model: nn.Module, img: torch.Tensor) -> Any:
    x = model.extract_feat(img)
    if hasattr(model, 'decode_head'):
        return model.decode_head(x)  # mmseg 0.x encode_decode, no aux head
    return x


def dummy_forward(model: nn.Module, img: torch.Tensor) -> Any:
    """The forward mmdet 2.x / mmseg 0.x's get_flops counted (see module
    doc); for other models ``model(img)``."""
    try:
        from mmdet.models.detectors import BaseDetector
    except ImportError:  # pragma: no cover
        BaseDetector = ()
    try:
        from mmseg.models.segmentors import BaseSegmentor
    except ImportError:  # pragma: no cover
        BaseSegmentor = ()
    if BaseDetector and isinstance(model, BaseDetector):
        return _detector_dummy(model, img)
    if BaseSegmentor and isinstance(model, BaseSegmentor):
        return _segmentor_dummy(model, img)
    if hasattr(model, 'extract_feat') and hasattr(model, 'head'):
        return model.head(model.extract_feat(img))  # mmpretrain classifier
    return model(img)


class _DummyRunner(nn.Module):
    """Traceable wrapper: ``forward(img)`` -> tensors of the dummy forward."""

    def __init__(self, model: nn.Module,
                 forward: Callable[[nn.Module, torch.Tensor], Any]):
        super().__init__()
        self.model = model
        self._run = forward

    def forward(self, img: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        return _flat_tensors(self._run(self.model, img))


# ---------------------------------------------------------------- counting
class _HookTarget:
    """What an mmcv hook writes ``__flops__`` on: the module's attributes,
    its own counter (the module itself is left untouched)."""

    def __init__(self, module: nn.Module):
        self.__dict__['_module'] = module
        self.__dict__['__flops__'] = 0

    def __getattr__(self, name):
        return getattr(self.__dict__['_module'], name)


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


def _matmul_macs(a: torch.Tensor, b: torch.Tensor) -> int:
    """Multiply-adds of ``a @ b`` with broadcasting."""
    if a.dim() == 0 or b.dim() == 0:
        return 0
    n = a.shape[-2] if a.dim() > 1 else 1
    k = a.shape[-1]
    m = b.shape[-1] if b.dim() > 1 else 1
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return _prod(batch) * n * k * m


def attention_macs(func, args: tuple, kwargs: dict) -> int:
    """Multiply-adds of one attention matmul call, 0 for anything else.

    ``scaled_dot_product_attention``: QK^T + AV; ``matmul``/``@``/``bmm``/
    ``baddbmm``; two-operand ``einsum`` (product of all index sizes).
    """
    name = getattr(func, '__name__', '')
    if func is F.scaled_dot_product_attention:
        q = args[0] if args else kwargs['query']
        k = args[1] if len(args) > 1 else kwargs['key']
        v = args[2] if len(args) > 2 else kwargs['value']
        *batch, L, E = q.shape
        return _prod(batch) * L * k.shape[-2] * (E + v.shape[-1])
    if name in ('matmul', '__matmul__', 'bmm', 'mm'):
        return _matmul_macs(args[0], args[1])
    if name == '__rmatmul__':
        return _matmul_macs(args[1], args[0])
    if name == 'baddbmm':
        return _matmul_macs(args[1], args[2])
    if name == 'einsum':
        equation, *operands = args
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
        if len(operands) != 2:
            return 0
        inputs = equation.replace(' ', '').split('->')[0].split(',')
        sizes = {}
        for letters, t in zip(inputs, operands):
            if '.' in letters:
                return 0
            sizes.update(zip(letters, t.shape))
        return _prod(sizes.values())
    return 0


class _AttentionMatmuls(TorchFunctionMode):
    """Counts attention matmuls (see :func:`attention_macs`) made while
    ``active()``, attributed to ``where()``; with ``shape_only``, fused
    attention returns zeros of the right shape instead of computing."""

    def __init__(self, active: Callable[[], bool], where: Callable[[], str],
                 counts: Dict[str, int], shape_only: bool):
        super().__init__()
        self.active, self.where, self.counts = active, where, counts
        self.shape_only = shape_only

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.active():
            macs = attention_macs(func, args, kwargs)
            if macs:
                self.counts[f'{self.where()}.(attention matmuls)'] += macs
        if self.shape_only and func is F.scaled_dot_product_attention:
            q = args[0] if args else kwargs['query']
            v = args[2] if len(args) > 2 else kwargs['value']
            return q.new_zeros(*q.shape[:-1], v.shape[-1])
        return func(*args, **kwargs)


def _pair(value, n: int) -> Tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, ) * n


def _output_shape(module: nn.Module, x: torch.Tensor,
                  output_size=None) -> Optional[Tuple[int, ...]]:
    """Output shape of a conv / transposed conv / linear, None if unknown."""
    if isinstance(module, nn.Linear):
        return (*x.shape[:-1], module.out_features)
    if isinstance(module, nn.modules.conv._ConvNd):
        n = len(module.kernel_size)
        spatial = x.shape[-n:]
        k, s, d = (_pair(v, n) for v in (module.kernel_size, module.stride,
                                         module.dilation))
        if module.transposed:
            if output_size is not None:
                return (*x.shape[:-n - 1], module.out_channels,
                        *tuple(output_size)[-n:])
            p, op = _pair(module.padding, n), _pair(module.output_padding, n)
            out = [(i - 1) * s_ - 2 * p_ + d_ * (k_ - 1) + op_ + 1
                   for i, s_, p_, d_, k_, op_ in zip(spatial, s, p, d, k, op)]
        elif module.padding == 'same':
            out = list(spatial)
        else:
            p = (0, ) * n if module.padding == 'valid' else \
                _pair(module.padding, n)
            out = [(i + 2 * p_ - d_ * (k_ - 1) - 1) // s_ + 1
                   for i, s_, p_, d_, k_ in zip(spatial, s, p, d, k)]
        return (*x.shape[:-n - 1], module.out_channels, *out)
    return None


def _zeros_forward(module: nn.Module):
    """A forward returning zeros of the module's output shape."""
    def forward(x, *args, **kwargs):
        shape = _output_shape(module, x, kwargs.get('output_size'))
        return x.new_zeros(shape)
    return forward


def attention_scopes(model: nn.Module) -> List[nn.Module]:
    """Where the paper's counts include attention matmuls: the backbone
    (the whole model if it has none), and every RSWAtt attention outside it
    (RSWAttNeck's, RSWAttHead's, RSWAttUPerHead's). No paper figure covers
    those, and without them the neck and the heads would count as their
    linear layers only. Other heads' attention (Sparse R-CNN's) stays
    uncounted, as in the paper's figures."""
    from mmvisattn.models.layers import ReconstructedWindowAttention
    backbone = getattr(model, 'backbone', None)
    scopes = [backbone] if isinstance(backbone, nn.Module) else [model]
    inside = {id(m) for scope in scopes for m in scope.modules()}
    return scopes + [
        m for m in model.modules()
        if isinstance(m, ReconstructedWindowAttention) and id(m) not in inside
    ]


def deform_conv_flops_counter_hook(module: nn.Module, inputs: tuple,
                                   output: torch.Tensor) -> None:
    """MACs of a deformable conv as of a plain conv of its kernel: every
    output element takes ``in_channels / groups x kh x kw`` (the bilinear
    sampling of the inputs is not counted), plus the bias if any."""
    kh, kw = _pair(module.kernel_size, 2)
    per_output = module.in_channels // module.groups * kh * kw
    bias = output.numel() if getattr(module, 'bias', None) is not None else 0
    module.__flops__ += int(output.numel() * per_output + bias)


def count_module_hooks(model: nn.Module, img: torch.Tensor,
                       forward: Callable[[nn.Module, torch.Tensor], Any],
                       attention_in: Sequence[nn.Module] = (),
                       shape_only: bool = True,
                       deform_convs: bool = False) -> Dict[str, int]:
    """FLOPs per module name: mmcv 1.x module hooks, plus the attention
    matmuls made inside any module of ``attention_in``, plus deformable
    convs counted as convs with ``deform_convs``.

    A module called several times (chunks, cascade stages sharing it)
    accumulates all its calls. These counts depend on shapes only, so with
    ``shape_only`` convolutions, linears and fused attention return zeros
    of their output shape instead of computing (same counts, several
    times faster; the dummy forwards never branch on feature values).
    """
    from mmcv.cnn.utils.flops_counter import get_modules_mapping
    mapping = get_modules_mapping()
    # our nn.Linear with a packed CPU inference path: a linear to count
    mapping[PackedLinear] = mapping[nn.Linear]
    if deform_convs and mmcv_ops_available():  # else a model has none
        from mmcv.ops import DeformConv2d, ModulatedDeformConv2d
        for cls in (DeformConv2d, ModulatedDeformConv2d):
            mapping[cls] = deform_conv_flops_counter_hook
    counts: Dict[str, int] = defaultdict(int)
    handles = []
    stack: List[str] = []
    depth = [0]  # how many attention scopes we are inside

    def make_hook(name, fn):
        def hook(module, inputs, output):
            target = _HookTarget(module)
            fn(target, inputs, output)
            counts[name] += int(target.__dict__['__flops__'])
        return hook

    scopes = {id(m) for m in attention_in}

    def make_enter(name, scope):
        def enter(module, inputs):
            stack.append(name)
            depth[0] += scope
        return enter

    def make_leave(scope):
        def leave(module, inputs, output):
            stack.pop()
            depth[0] -= scope
        return leave

    stubbed = []
    for name, module in model.named_modules():
        fn = mapping.get(type(module))  # exact types, as mmcv 1.x
        if fn is not None:
            handles.append(module.register_forward_hook(make_hook(name, fn)))
        if shape_only and 'forward' not in module.__dict__ and isinstance(
                module, (nn.Linear, nn.modules.conv._ConvNd)):
            module.forward = _zeros_forward(module)
            stubbed.append(module)
        if scopes:
            scope = int(id(module) in scopes)
            handles.append(module.register_forward_pre_hook(
                make_enter(name, scope)))
            handles.append(module.register_forward_hook(make_leave(scope)))
    mode = _AttentionMatmuls(lambda: depth[0] > 0,
                             lambda: stack[-1] if stack else '', counts,
                             shape_only)
    try:
        with torch.no_grad(), use_backend('plain'):
            if scopes or shape_only:
                with mode:
                    forward(model, img)
            else:
                forward(model, img)
    finally:
        for h in handles:
            h.remove()
        for module in stubbed:
            del module.forward
    return dict(counts)


def count_fvcore(model: nn.Module, img: torch.Tensor,
                 forward: Callable[[nn.Module, torch.Tensor], Any]
                 ) -> Dict[str, int]:
    """FLOPs per module name, fvcore convention (jit trace, all matmuls)."""
    runner = _DummyRunner(model, forward)
    analyzer = _flop_analyzer(runner, (img, ))
    with torch.no_grad():
        by_module = analyzer.by_module()
    # own FLOPs of each module (without its children's), so that sums over a
    # name prefix do not double count
    names = [n for n in by_module if n == 'model' or n.startswith('model.')]
    children: Dict[str, int] = defaultdict(int)
    for n in names:
        if n != 'model':
            children[n.rsplit('.', 1)[0]] += by_module[n]
    own = {}
    for n in names:
        flops = by_module[n] - children[n]
        if flops:
            own[n[len('model.'):] if n != 'model' else '(model)'] = int(flops)
    rest = by_module[''] - by_module.get('model', 0)
    if rest:
        own['(outside the model)'] = int(rest)
    return own


def model_complexity(model: nn.Module,
                     input_shape: Sequence[int],
                     convention: str = 'paper',
                     forward: Optional[Callable] = None,
                     shape_only: bool = True) -> Dict[str, Any]:
    """Params and FLOPs of ``model`` at one ``(C, H, W)`` input.

    Args:
        convention: ``'mmcv1'`` (the paper's detection/segmentation figures)
            or ``'fvcore'`` (all matmuls, the classification figures).
        forward: ``forward(model, img)``; :func:`dummy_forward` by default.
        shape_only: module-hook conventions only: skip the arithmetic of
            convs, linears and fused attention (see
            :func:`count_module_hooks`); the counts are the same.

    Returns:
        dict with ``flops`` (total), ``params`` (trainable, what mmcv
        counts), ``params_all``, ``by_module`` (FLOPs per counted module
        name) and ``params_by_module`` (trainable, per top-level child).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f'convention={convention!r}; choose from '
                         f'{CONVENTIONS}')
    forward = forward or dummy_forward
    model.eval()  # not chained: some backbones' train() returns None
    param = next(model.parameters(), None)
    img = torch.randn(1, *input_shape,
                      dtype=param.dtype if param is not None else None,
                      device=param.device if param is not None else None)
    if convention == 'fvcore':
        by_module = count_fvcore(model, img, forward)
    else:
        by_module = count_module_hooks(
            model, img, forward,
            attention_scopes(model) if convention == 'paper' else (),
            shape_only, deform_convs=convention == 'paper')
    params_by_module: Dict[str, int] = defaultdict(int)
    for name, p in model.named_parameters():
        if p.requires_grad:
            params_by_module[name.split('.')[0]] += p.numel()
    return dict(
        convention=convention,
        flops=float(sum(by_module.values())),
        params=float(sum(params_by_module.values())),
        params_all=float(sum(p.numel() for p in model.parameters())),
        by_module=by_module,
        params_by_module=dict(params_by_module))


def group_by_prefix(by_module: Dict[str, int], depth: int = 1
                    ) -> Dict[str, int]:
    """Sum per-module counts over the first ``depth`` name components."""
    groups: Dict[str, int] = defaultdict(int)
    for name, value in by_module.items():
        groups['.'.join(name.split('.')[:depth]) or '(root)'] += value
    return dict(groups)
