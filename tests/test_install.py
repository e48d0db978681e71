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


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the no-GPU refusal')
def test_force_cuda_is_refused_with_the_reason_and_keeps_mmcv(tmp_path):
    """``MMCV_FORCE_CUDA=1`` used to be ignored whenever a CPU-only
    ``mmcv.ops`` imported; now it asks for a CUDA build, and where one
    cannot be made (no CUDA torch, no nvcc, no GPU and no arch list) it
    stops naming the reason, before touching the installed mmcv."""
    import os
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHON=sys.executable, MMCV_FORCE_CUDA='1',
               CUDA_HOME=str(tmp_path / 'no-cuda'))
    env.pop('TORCH_CUDA_ARCH_LIST', None)
    proc = subprocess.run(['bash', 'tools/install.sh'], cwd=repo, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    reasons = ('this torch has no CUDA', f'no nvcc ({tmp_path}/no-cuda/bin/nvcc)')
    assert any(r in proc.stdout for r in reasons), proc.stdout[-3000:]
    assert 'building mmcv' not in proc.stdout
    subprocess.run([sys.executable, '-c', 'import mmcv.ops'], check=True,
                   cwd='/')


@pytest.mark.slow
def test_tracked_links_stay_inside_the_checkout():
    """A link committed by accident (a `data` link to one machine's
    datasets once was: `data/` in .gitignore matches directories only)
    breaks `make demo` on every other checkout. Tracked links must be
    relative and resolve inside the repository."""
    import os
    import subprocess

    from helpers import REPO
    if not os.path.isdir(os.path.join(REPO, '.git')) and \
            not os.path.isfile(os.path.join(REPO, '.git')):
        pytest.skip('not a git checkout (sdist or copied tree)')
    listing = subprocess.run(['git', 'ls-files', '-s'], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, check=True).stdout
    links = [line.split('\t', 1)[1] for line in listing.splitlines()
             if line.startswith('120000 ')]
    for path in links:
        target = os.readlink(os.path.join(REPO, path))
        assert not os.path.isabs(target), f'{path} -> {target}: absolute'
        resolved = os.path.realpath(os.path.join(REPO, path))
        assert resolved.startswith(os.path.realpath(REPO) + os.sep) and \
            os.path.exists(resolved), f'{path} -> {target}: outside or missing'
