"""mmcv's compiled ops that this project's detectors and segmentors call:
RoIAlign (``aligned=True``), nms, batched_nms, soft_nms, DeformConv2d,
ModulatedDeformConv2d and the sigmoid focal loss.

CPU half: mmcv's CPU kernels against torchvision's (soft_nms against its
decay rule written out here), outputs and gradients. It shows that an mmcv
build links and that its CPU kernels are right, and needs only torch,
torchvision, mmcv, mmengine, numpy and pytest (no mmvisattn), so an
environment that holds just a prebuilt mmcv wheel runs it::

    python -m pytest tests/test_mmcv_ops.py -q

CUDA half (marked ``gpu``, skipped without a GPU): the same cases on CUDA in
fp32 and under fp16 and bf16 autocast against mmcv's CPU kernels in fp32,
and the sigmoid focal loss (mmcv has no CPU kernel for it) against mmdet's
Python version. Under bf16 the ops run inside
``mmvisattn.environment.mmcv_ops_fp32_under_bf16``, as bf16 training runs them
(mmcv has no bf16 kernels). ``dev/gpu/gpu_check.sh`` runs the
module first on a GPU machine; on the CPU the comparison itself runs in fp32
(and bf16 where mmvisattn is installed).

Every test skips, with the reason, where ``mmcv.ops`` does not load its
compiled ``_ext`` (mmcv-lite, a build without ops, or a build for another
torch)."""
import math

import pytest
import torch
from torch.testing import assert_close

try:
    from mmcv import ops
    NO_EXT = ''
except ImportError as exc:
    ops, NO_EXT = None, f'mmcv.ops does not load its compiled _ext ({exc})'

tv_ops = pytest.importorskip('torchvision.ops')

pytestmark = pytest.mark.skipif(ops is None, reason=NO_EXT)

# gradients sum over many sampling points in another order than torchvision
GRAD_TOL = dict(rtol=1e-4, atol=1e-5)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _boxes(g, n, size=100., clusters=6):
    """(n, 4) x1y1x2y2 boxes around a few centres, so many overlap."""
    centres = torch.rand(clusters, 2, generator=g) * size
    c = centres[torch.randint(clusters, (n, ), generator=g)]
    c = c + torch.randn(n, 2, generator=g) * 4
    wh = 8 + torch.rand(n, 2, generator=g) * 24
    return torch.cat([c - wh / 2, c + wh / 2], 1)


def _scores(g, n):
    """Distinct scores in (0, 1], at least 1/n apart (distinct in bf16 too
    for n <= 256)."""
    return (torch.randperm(n, generator=g).float() + 1) / n


def _rois(g, n, batches, height, width):
    """(n, 5) RoIs (batch index, x1, y1, x2, y2) in image coordinates, some
    reaching past the image and some under a pixel wide."""
    x1 = torch.rand(n, generator=g) * (width + 16) - 8
    y1 = torch.rand(n, generator=g) * (height + 16) - 8
    w = torch.rand(n, generator=g) * width * 0.6 + 0.3
    h = torch.rand(n, generator=g) * height * 0.6 + 0.3
    idx = torch.randint(batches, (n, ), generator=g).float()
    return torch.stack([idx, x1, y1, x1 + w, y1 + h], 1)


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


# -- CPU: mmcv against torchvision ------------------------------------------


@pytest.mark.parametrize('sampling_ratio', [0, 2])
def test_roi_align_aligned_equals_torchvision(sampling_ratio):
    g = _gen()
    x = torch.randn(2, 4, 24, 30, generator=g)
    rois = _rois(g, 16, 2, 48, 60)
    ours_x, theirs_x = _leaves(x, x)
    layer = ops.RoIAlign(7, spatial_scale=0.5, sampling_ratio=sampling_ratio,
                         aligned=True)
    out = layer(ours_x, rois)
    want = tv_ops.roi_align(theirs_x, rois, 7, spatial_scale=0.5,
                            sampling_ratio=sampling_ratio, aligned=True)
    assert out.shape == (16, 4, 7, 7)
    assert_close(out, want)
    w = torch.randn(out.shape, generator=g)
    (out * w).sum().backward()
    (want * w).sum().backward()
    assert_close(ours_x.grad, theirs_x.grad, **GRAD_TOL)


@pytest.mark.parametrize('iou', [0.3, 0.5, 0.7])
def test_nms_keeps_what_torchvision_keeps(iou):
    g = _gen(1)
    boxes, scores = _boxes(g, 200), _scores(g, 200)
    dets, keep = ops.nms(boxes, scores, iou)
    want = tv_ops.nms(boxes, scores, iou)
    assert 0 < len(want) < 200
    assert keep.tolist() == want.tolist()
    assert_close(dets, torch.cat([boxes[want], scores[want, None]], 1))


def test_nms_of_no_boxes():
    dets, keep = ops.nms(torch.zeros(0, 4), torch.zeros(0), 0.5)
    assert dets.shape == (0, 5) and keep.shape == (0, )


@pytest.mark.parametrize('class_agnostic,split_thr', [
    (False, 10000),  # one nms over boxes offset per class
    (False, 8),  # more boxes than split_thr: one nms per class
    (True, 10000),
])
def test_batched_nms_equals_torchvision(class_agnostic, split_thr):
    g = _gen(2)
    boxes, scores = _boxes(g, 150), _scores(g, 150)
    idxs = torch.randint(4, (150, ), generator=g)
    dets, keep = ops.batched_nms(
        boxes, scores, idxs,
        dict(iou_threshold=0.5, split_thr=split_thr,
             class_agnostic=class_agnostic))
    want = tv_ops.nms(boxes, scores, 0.5) if class_agnostic else \
        tv_ops.batched_nms(boxes, scores, idxs, 0.5)
    assert keep.tolist() == want.tolist()
    assert_close(dets, torch.cat([boxes[want], scores[want, None]], 1))


def _iou(a, b):
    w = max(0., min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0., min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])
    return inter / (area - inter)


def _soft_nms(boxes, scores, iou_threshold, sigma, min_score, method):
    """Soft-NMS (Bodla et al., 2017) step by step: take the highest
    remaining score; scale every other remaining score by a weight of its
    IoU u with the box taken (linear: 1 - u where u >= iou_threshold, else
    1; gaussian: exp(-u^2 / sigma)); drop what falls under min_score.
    Returns [(index, score when taken)] in the order taken."""
    boxes = boxes.tolist()
    left = dict(enumerate(scores.tolist()))
    taken = []
    while left:
        best = max(left, key=left.get)
        taken.append((best, left.pop(best)))
        for j in list(left):
            u = _iou(boxes[best], boxes[j])
            if method == 'linear':
                left[j] *= 1 - u if u >= iou_threshold else 1.
            else:
                left[j] *= math.exp(-u * u / sigma)
            if left[j] < min_score:
                del left[j]
    return taken


@pytest.mark.parametrize('method,min_score', [('linear', 1e-3),
                                              ('linear', 0.2),
                                              ('gaussian', 1e-3),
                                              ('gaussian', 0.2)])
def test_soft_nms_decays_scores_by_the_rule(method, min_score):
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [2, 0, 12, 10],
                          [0, 0, 10, 12], [20, 20, 30, 30], [21, 22, 31, 30],
                          [24, 20, 34, 29], [50, 50, 52, 52]]).float()
    scores = torch.tensor([0.9, 0.8, 0.75, 0.62, 0.7, 0.65, 0.4, 0.3])
    dets, inds = ops.soft_nms(boxes, scores, iou_threshold=0.3, sigma=0.5,
                              min_score=min_score, method=method)
    want = _soft_nms(boxes, scores, 0.3, 0.5, min_score, method)
    assert inds.tolist() == [i for i, _ in want]
    assert_close(dets[:, 4], torch.tensor([s for _, s in want]))
    assert_close(dets[:, :4], boxes[inds])
    # the rule changed scores, and the higher min_score dropped boxes
    assert dets[:, 4].tolist() != sorted(scores.tolist(), reverse=True)
    assert (len(want) < len(boxes)) == (min_score > 0.1)


def _out_size(size, k, stride, padding, dilation):
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


DCN_SETTINGS = [
    # stride, padding, dilation, groups, deform_groups
    (1, 1, 1, 1, 1),
    (2, 1, 1, 1, 2),
    (1, 2, 2, 2, 1),
]


def _dcn_inputs(g, stride, padding, dilation, deform_groups):
    x = torch.randn(2, 4, 9, 11, generator=g)
    oh = _out_size(9, 3, stride, padding, dilation)
    ow = _out_size(11, 3, stride, padding, dilation)
    offset = torch.randn(2, deform_groups * 18, oh, ow, generator=g) * 2
    mask = torch.rand(2, deform_groups * 9, oh, ow, generator=g)
    return x, offset, mask


@pytest.mark.parametrize('stride,padding,dilation,groups,deform_groups',
                         DCN_SETTINGS)
def test_deform_conv2d_equals_torchvision(stride, padding, dilation, groups,
                                          deform_groups):
    g = _gen(3)
    x, offset, _ = _dcn_inputs(g, stride, padding, dilation, deform_groups)
    layer = ops.DeformConv2d(4, 6, 3, stride=stride, padding=padding,
                             dilation=dilation, groups=groups,
                             deform_groups=deform_groups)
    ours = _leaves(x, offset)
    theirs = _leaves(x, offset, layer.weight)
    out = layer(*ours)
    want = tv_ops.deform_conv2d(theirs[0], theirs[1], theirs[2],
                                stride=stride, padding=padding,
                                dilation=dilation)
    assert_close(out, want)
    w = torch.randn(out.shape, generator=g)
    (out * w).sum().backward()
    (want * w).sum().backward()
    for a, b in zip(ours + [layer.weight], theirs):
        assert_close(a.grad, b.grad, **GRAD_TOL)


@pytest.mark.parametrize('stride,padding,dilation,groups,deform_groups',
                         DCN_SETTINGS)
def test_modulated_deform_conv2d_equals_torchvision(stride, padding, dilation,
                                                    groups, deform_groups):
    g = _gen(4)
    x, offset, mask = _dcn_inputs(g, stride, padding, dilation,
                                  deform_groups)
    layer = ops.ModulatedDeformConv2d(4, 6, 3, stride=stride, padding=padding,
                                      dilation=dilation, groups=groups,
                                      deform_groups=deform_groups, bias=True)
    with torch.no_grad():
        layer.bias.normal_(generator=g)
    ours = _leaves(x, offset, mask)
    theirs = _leaves(x, offset, mask, layer.weight, layer.bias)
    out = layer(*ours)
    want = tv_ops.deform_conv2d(theirs[0], theirs[1], theirs[3], theirs[4],
                                stride=stride, padding=padding,
                                dilation=dilation, mask=theirs[2])
    assert_close(out, want)
    w = torch.randn(out.shape, generator=g)
    (out * w).sum().backward()
    (want * w).sum().backward()
    for a, b in zip(ours + [layer.weight, layer.bias], theirs):
        assert_close(a.grad, b.grad, **GRAD_TOL)


# -- the same ops on another device, under autocast, against the CPU -------
#
# Each case makes its inputs on the CPU in fp32, rounded to the autocast
# dtype (so both sides see the same values), and runs the op as a model
# under autocast hands it its inputs: features, offsets, masks and logits in
# the autocast dtype, boxes for NMS in fp32 with scores in that dtype (as
# mmdet's RPN gives them), RoIs cast to the features' dtype (as mmdet's RoI
# extractor does). The result: outputs and gradients, in fp32 on the CPU.

DTYPES = {'fp32': torch.float32, 'fp16': torch.float16,
          'bf16': torch.bfloat16}
# relative to the largest reference value
TOLERANCE = {'fp32': 1e-4, 'fp16': 1e-2, 'bf16': 2e-2}


def _rounded(t, cast):
    return t.to(cast).float()


def _run(fn, inputs, device, cast):
    """``fn(*inputs)`` on ``device`` under autocast in ``cast``, with the
    fp32 ``inputs`` moved there as leaves (``fn`` casts them as a model
    would); returns the outputs and the floating inputs' gradients of a
    fixed random weighting of the outputs, in fp32 on the CPU."""
    leaves = [t.detach().to(device, copy=True).requires_grad_(
        t.is_floating_point()) for t in inputs]
    with torch.autocast(device, dtype=cast, enabled=cast != torch.float32):
        outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs, )
    g = _gen(0)
    weighted = [(o.float() * torch.randn(o.shape, generator=g).to(o.device))
                .sum() for o in outs if o.requires_grad]
    sum(weighted).backward()
    return [o.detach().cpu() if not o.is_floating_point()
            else o.detach().float().cpu() for o in outs] + \
        [t.grad.cpu() for t in leaves if t.grad is not None]


def _roi_align_case(cast):
    g = _gen(5)
    x = _rounded(torch.randn(2, 8, 24, 30, generator=g), cast)
    rois = _rounded(_rois(g, 24, 2, 48, 60), cast)
    layer = ops.RoIAlign(7, spatial_scale=0.5, sampling_ratio=0, aligned=True)

    def fn(x, rois):
        x = x.to(cast)
        return layer(x, rois.type_as(x))
    return fn, [x, rois]


def _nms_case(cast):
    g = _gen(6)
    boxes, scores = _boxes(g, 200), _rounded(_scores(g, 200), cast)

    def fn(boxes, scores):
        return ops.nms(boxes, scores.to(cast), 0.5)
    return fn, [boxes, scores]


def _batched_nms_case(cast):
    g = _gen(7)
    boxes, scores = _boxes(g, 200), _rounded(_scores(g, 200), cast)
    idxs = torch.randint(4, (200, ), generator=g)

    def fn(boxes, scores, idxs):
        return ops.batched_nms(boxes, scores.to(cast), idxs,
                               dict(iou_threshold=0.5))
    return fn, [boxes, scores, idxs]


def _deform_conv_case(cast, modulated):
    """The functions DeformConv2d and ModulatedDeformConv2d call, with
    their fp32 weights (the functions cast them to the input's dtype)."""
    g = _gen(8)
    x, offset, mask = (_rounded(t, cast)
                       for t in _dcn_inputs(g, 1, 1, 1, 2))
    weight = _rounded(torch.randn(6, 4, 3, 3, generator=g) * 0.2, cast)
    bias = _rounded(torch.randn(6, generator=g), cast)
    if modulated:
        def fn(x, offset, mask, weight, bias):
            return ops.modulated_deform_conv2d(x.to(cast), offset.to(cast),
                                               mask.to(cast), weight, bias,
                                               1, 1, 1, 1, 2)
        return fn, [x, offset, mask, weight, bias]

    def fn(x, offset, weight):
        return ops.deform_conv2d(x.to(cast), offset.to(cast), weight, 1, 1,
                                 1, 1, 2)
    return fn, [x, offset, weight]


def _focal_case(cast):
    g = _gen(9)
    pred = _rounded(torch.randn(64, 10, generator=g) * 3, cast)
    target = torch.randint(11, (64, ), generator=g)  # 10: background

    def fn(pred, target):
        return ops.sigmoid_focal_loss(pred.to(cast), target, 2.0, 0.25, None,
                                      'none')
    return fn, [pred, target]


def _focal_reference(pred, target):
    """mmdet's Python sigmoid focal loss, on one-hot targets (as mmdet's
    FocalLoss calls it where mmcv's kernel is not available)."""
    focal = pytest.importorskip('mmdet.models.losses.focal_loss')
    one_hot = torch.nn.functional.one_hot(target, 11)[:, :10]
    pred = pred.clone().requires_grad_()
    loss = focal.py_sigmoid_focal_loss(pred, one_hot, gamma=2.0, alpha=0.25,
                                       reduction='none')
    (loss * torch.randn(loss.shape, generator=_gen(0))).sum().backward()
    return [loss.detach(), pred.grad]


CASES = {
    'roi_align': _roi_align_case,
    'nms': _nms_case,
    'batched_nms': _batched_nms_case,
    'deform_conv2d': lambda cast: _deform_conv_case(cast, False),
    'modulated_deform_conv2d': lambda cast: _deform_conv_case(cast, True),
    'sigmoid_focal_loss': _focal_case,
}


def _compare(name, device, dtype):
    """The case on ``device`` under ``dtype`` autocast against mmcv's CPU
    kernels in fp32 (mmdet's Python version for the focal loss)."""
    cast = DTYPES[dtype]
    fn, inputs = CASES[name](cast)
    if name == 'sigmoid_focal_loss':
        want = _focal_reference(*inputs)
    else:  # the same inputs, kept in fp32
        want = _run(CASES[name](torch.float32)[0], inputs, 'cpu',
                    torch.float32)
    run = fn
    if cast == torch.bfloat16:
        # as bf16 training runs them: mmcv has no bf16 kernels
        environment = pytest.importorskip(
            'mmvisattn.environment',
            reason='bf16: mmcv\'s ops run inside mmvisattn\'s fp32 scope')

        def run(*args):
            with environment.mmcv_ops_fp32_under_bf16():
                return fn(*args)
    got = _run(run, inputs, device, cast)
    assert len(got) == len(want), (len(got), len(want))
    for i, (a, b) in enumerate(zip(got, want)):
        what = f'{name} {dtype} on {device}: result {i}'
        if not b.is_floating_point():  # kept indices: the same boxes
            assert a.tolist() == b.tolist(), what
            continue
        assert a.shape == b.shape, what
        assert torch.isfinite(a).all(), what
        err = float((a - b).abs().max() / b.abs().max().clamp_min(1e-6))
        assert err < TOLERANCE[dtype], (what, err)


def _cuda_ops_reason():
    if not torch.cuda.is_available():
        return 'needs a CUDA GPU (none visible); gpu_check.sh runs it on one'
    if ops is not None and ops.get_compiling_cuda_version() == 'not available':
        return 'this mmcv build has no CUDA ops'
    return ''


@pytest.mark.gpu
@pytest.mark.skipif(bool(_cuda_ops_reason()), reason=_cuda_ops_reason())
@pytest.mark.parametrize('dtype', sorted(DTYPES))
@pytest.mark.parametrize('name', sorted(CASES))
def test_cuda_op_equals_the_cpu(name, dtype):
    _compare(name, 'cuda', dtype)


@pytest.mark.parametrize('dtype', ['fp32', 'bf16'])
@pytest.mark.parametrize('name', sorted(set(CASES) - {'sigmoid_focal_loss'}))
def test_the_device_comparison_runs_on_the_cpu(name, dtype):
    """The CUDA comparison's own code, run on the CPU (mmcv has no fp16 CPU
    kernels, and no CPU focal loss)."""
    _compare(name, 'cpu', dtype)
