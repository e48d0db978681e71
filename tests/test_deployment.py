"""tools/deployment/pytorch2onnx.py's export-time replacements, each against
the op it stands for, through onnxruntime. The tool on the demo detector and
segmentor, and mmdet's/mmseg's Inferencers on our configs, are in
tests/test_user_tools.py (they share its trained runs)."""
import io

import numpy as np
import pytest
import torch
from torch import nn

from helpers import load_tool

ort = pytest.importorskip(
    'onnxruntime', reason='onnxruntime is in requirements/deploy.txt')
pytest.importorskip('onnx', reason='onnx is in requirements/deploy.txt')

tool = load_tool('tools/deployment/pytorch2onnx.py')


def _run_onnx(module, args, opset=17, **export_kwargs):
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, f, opset_version=opset, dynamo=False,
                          **export_kwargs)
    session = ort.InferenceSession(f.getvalue(),
                                   providers=['CPUExecutionProvider'])
    feed = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    return session.run(None, feed)


@pytest.mark.parametrize('size,out', [((16, 16), 6), ((13, 7), (3, 2)),
                                      ((5, 9), 1), ((6, 6), 6), ((4, 4), 6)])
def test_sliced_pool_equals_adaptive_average_pooling(size, out):
    """The windows of nn.AdaptiveAvgPool2d, uneven and overlapping ones
    included (16 -> 6, 13 -> 3), and an output larger than the input."""
    x = torch.randn(2, 3, *size)
    pool = nn.AdaptiveAvgPool2d(out)
    out2 = (out, out) if isinstance(out, int) else out
    sliced = tool.SlicedAdaptiveAvgPool(out2, size)
    torch.testing.assert_close(sliced(x), pool(x), rtol=0, atol=1e-6)


def test_pyramid_pooling_exports_at_its_size_and_is_restored():
    """A pyramid pooling module behind a layer that hides the input size
    from the exporter (as the backbones' graph-computed sizes do): exported
    with the swap, equal to PyTorch's adaptive pooling under onnxruntime;
    the model keeps its own modules afterwards."""

    class Hidden(nn.Module):  # the size reaches the pooling as graph values
        def forward(self, x):
            b, c, h, w = x.shape
            return x.flatten(2).reshape(b, c, h, w)

    model = nn.Sequential(Hidden(), nn.AdaptiveAvgPool2d(3)).eval()
    x = torch.randn(1, 4, 10, 10)
    f = io.BytesIO()
    with pytest.raises(Exception, match='adaptive_avg_pool2d'):
        torch.onnx.export(model, (x, ), f, opset_version=17, dynamo=False,
                          dynamic_axes={'x': {2: 'h', 3: 'w'}},
                          input_names=['x'])
    with tool.static_adaptive_pools(model, (x, )):
        assert isinstance(model[1], tool.SlicedAdaptiveAvgPool)
        out = _run_onnx(model, (x, ))[0]
    assert isinstance(model[1], nn.AdaptiveAvgPool2d)
    np.testing.assert_allclose(out, model(x).detach().numpy(), atol=1e-6)


@pytest.mark.parametrize('opset', [16, 17])
@pytest.mark.parametrize('aligned', [True, False])
def test_roi_align_exports_equal_to_mmcv(aligned, opset):
    """mmcv's RoIAlign (real op) against the exported ONNX RoiAlign, on
    rois of every kind: fractional, the whole image, smaller than a cell."""
    from mmcv.ops import RoIAlign
    torch.manual_seed(0)
    feat = torch.randn(1, 8, 40, 40)
    rois = torch.tensor([[0, 10.3, 12.1, 60.7, 90.2], [0, 0., 0., 159., 159.],
                         [0, 33., 40., 35., 41.], [0, 1., 2., 1.5, 2.5]])
    roi_align = RoIAlign((7, 7), spatial_scale=0.25, sampling_ratio=0,
                         aligned=aligned)
    with tool.onnx_roi_align(opset):
        out = _run_onnx(roi_align, (feat, rois), opset)[0]
    np.testing.assert_allclose(out, roi_align(feat, rois).numpy(),
                               atol=1e-5)


def test_roi_align_is_refused_below_opset_16():
    """Below opset 16 ONNX's RoiAlign has no half-pixel mode: mmcv's own
    symbolic is then 1.6 off for aligned=True; the tool refuses by name."""
    from mmcv.ops import RoIAlign
    roi_align = RoIAlign((7, 7), spatial_scale=0.25, aligned=True)
    args = (torch.randn(1, 8, 16, 16), torch.tensor([[0, 1., 2., 30., 40.]]))
    with pytest.raises(SystemExit, match='--opset 11.*opset 16 or later'):
        with tool.onnx_roi_align(11):
            _run_onnx(roi_align, args, 11)


def test_box_decoding_exports_equal_to_eager():
    """mmdet's DeltaXYWHBBoxCoder takes a broken ONNX branch while
    exporting (it imports mmdet.core); the tool's decode is the eager one,
    traced: equal under onnxruntime, clipped to the image like eager."""
    from mmdet.models.task_modules.coders import DeltaXYWHBBoxCoder
    coder = DeltaXYWHBBoxCoder(target_means=[0.] * 4,
                               target_stds=[0.1, 0.1, 0.2, 0.2])

    class Decode(nn.Module):
        def forward(self, boxes, deltas):
            return coder.decode(boxes, deltas, max_shape=(64, 80))

    torch.manual_seed(0)
    boxes = torch.tensor([[1., 2., 30., 40.], [50., 10., 79., 63.]])
    deltas = torch.randn(2, 4)
    with tool.eager_box_decoding():
        out = _run_onnx(Decode(), (boxes, deltas))[0]
    np.testing.assert_allclose(out, Decode()(boxes, deltas).numpy(),
                               atol=1e-5)
