"""The installed stack: what tools/install.sh promises."""
import importlib

import numpy as np
import pytest
import torch
from mmengine.utils import digit_version


@pytest.mark.parametrize('module', ['mmdet.models', 'mmseg.models',
                                    'mmpretrain.models', 'mmcv.ops'])
def test_stack_imports(module):
    importlib.import_module(module)


def test_versions_are_the_pinned_ones():
    import mmcv
    import mmdet
    import mmengine
    import mmpretrain
    import mmseg
    assert mmcv.__version__ == '2.1.0'
    assert mmengine.__version__ == '0.10.7'
    assert mmdet.__version__ == '3.3.0'
    assert mmseg.__version__ == '1.2.2'
    assert mmpretrain.__version__ == '1.2.0'
    assert digit_version(np.__version__) < digit_version('2.4.0')


def test_compiled_ops_run_on_cpu():
    from mmcv.ops import RoIAlign, nms
    feats = torch.arange(16.).view(1, 1, 4, 4)
    rois = torch.tensor([[0., 0., 0., 3., 3.]])
    out = RoIAlign((2, 2), spatial_scale=1., sampling_ratio=2)(feats, rois)
    assert out.shape == (1, 1, 2, 2) and torch.isfinite(out).all()
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.],
                          [20., 20., 30., 30.]])
    _, keep = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), iou_threshold=0.5)
    assert keep.tolist() == [0, 2]
