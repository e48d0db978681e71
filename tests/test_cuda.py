"""The GPU path: every backbone and attention variant forward and backward
on CUDA in fp32/fp16/bf16 against the CPU, no host sync in a forward, the
CPU-only fast path kept off CUDA, SDPA's fused kernels reachable,
``torch.compile``, and 2-iteration Cascade / UperNet runs with ``--amp``
through the tools. Every test here skips, with the reason, on a machine
without CUDA; ``dev/gpu/gpu_check.sh`` runs this module on a
GPU machine."""
import copy
import os.path as osp
import subprocess
import sys

import pytest
import torch

import mmvisattn  # noqa: F401
from helpers import REPO, generate_shapes
from helpers.backbones import AUTOCAST_BACKBONES
from mmvisattn.registry import MODELS

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason='needs a CUDA GPU (none visible); gpu_check.sh runs it on one'),
]

VARIANTS = {
    **AUTOCAST_BACKBONES,
    'swin-abspos': dict(type='SwinTransformer', arch='tiny',
                        use_abs_pos_embed=True, attn_cfg=dict(
                            type='WindowAttention', relative_position=False)),
    'swin-norel': dict(type='SwinTransformer', arch='tiny', attn_cfg=dict(
        type='WindowAttention', relative_position=False)),
    'swin-noshift': dict(type='SwinTransformer', arch='tiny', attn_cfg=dict(
        type='WindowAttention', shift_mode='none')),
    'tnt-cls-token': dict(type='TNT', arch='small', out_type='cls_token',
                          img_size=128),
}
DTYPES = {'fp32': torch.float32, 'fp16': torch.float16,
          'bf16': torch.bfloat16}
# relative to the largest output value: half precision over a deep stack
TOLERANCE = {'fp32': 2e-3, 'fp16': 2e-2, 'bf16': 6e-2}


@pytest.fixture(autouse=True)
def no_tf32():
    """fp32 on CUDA means fp32 here (TF32 matmuls round to 10 bits)."""
    old = (torch.backends.cuda.matmul.allow_tf32,
           torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    (torch.backends.cuda.matmul.allow_tf32,
     torch.backends.cudnn.allow_tf32) = old


def _pair(name, **overrides):
    torch.manual_seed(0)
    cpu = MODELS.build(dict(copy.deepcopy(VARIANTS[name]), **overrides))
    cpu.init_weights()
    gpu = copy.deepcopy(cpu).cuda()
    return cpu, gpu


def _close(got, want, tol, what):
    got, want = got.float().cpu(), want.float()
    assert torch.isfinite(got).all(), what
    err = float((got - want).abs().max() / want.abs().max().clamp_min(1e-6))
    assert err < tol, (what, err)


@pytest.mark.parametrize('dtype', sorted(DTYPES))
@pytest.mark.parametrize('name', sorted(VARIANTS))
def test_forward_and_backward_equal_the_cpu(name, dtype):
    """Eval (the scatter-add fast path into an fp32 residual under
    autocast) and a training backward, against the CPU in fp32. Without
    stochastic depth: the CPU and CUDA generators drop different blocks
    (the gradients then differ by 2-94%, seen on an H200)."""
    cpu, gpu = _pair(name, drop_path_rate=0.)
    x = torch.randn(2, 3, 128, 128)
    cast = DTYPES[dtype]
    cpu.eval(), gpu.eval()
    with torch.no_grad():
        want = cpu(x)
        with torch.autocast('cuda', dtype=cast,
                            enabled=cast != torch.float32):
            got = gpu(x.cuda())
    for i, (a, b) in enumerate(zip(got, want)):
        _close(a, b, TOLERANCE[dtype], f'{name} {dtype} output {i}')
    cpu.train(), gpu.train()
    sum(o.square().mean() for o in cpu(x)).backward()
    with torch.autocast('cuda', dtype=cast, enabled=cast != torch.float32):
        loss = sum(o.float().square().mean() for o in gpu(x.cuda()))
    loss.backward()
    grads = {n: p.grad for n, p in cpu.named_parameters()
             if p.grad is not None}
    for n, p in gpu.named_parameters():
        if n in grads:
            assert torch.isfinite(p.grad).all(), (name, dtype, n)
            if dtype == 'fp32':
                _close(p.grad, grads[n], 1e-2, f'{name} grad {n}')


@pytest.mark.parametrize('name', sorted(VARIANTS))
def test_forward_has_no_host_sync(name):
    """``set_sync_debug_mode('error')`` raises on any operation that makes
    the host wait for the GPU (``.item()``, a value in Python control flow,
    ``nonzero``, a device-to-host copy). One warm-up forward first: the
    shape caches are built once per size, outside the hot loop."""
    _, gpu = _pair(name)
    x = torch.randn(2, 3, 128, 128, device='cuda')
    for train in (False, True):
        gpu.train(train)
        with torch.set_grad_enabled(train):
            gpu(x)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode('error')
            try:
                out = gpu(x)
            finally:
                torch.cuda.set_sync_debug_mode(0)
        if train:
            sum(o.mean() for o in out).backward()


def test_cpu_fast_path_never_runs_on_cuda(monkeypatch):
    """The oneDNN packed linears and the cache-sized chunking are for the
    CPU only."""
    from mmvisattn.ops import linear
    packed = []
    monkeypatch.setattr(linear, 'pack_weight',
                        lambda *a: packed.append(1) or a[0], raising=False)
    _, gpu = _pair('swin-cyclic')
    with torch.no_grad():
        gpu.eval()(torch.randn(1, 3, 128, 128, device='cuda'))
    assert packed == []


@pytest.mark.parametrize('dtype', ['fp16', 'bf16'])
def test_window_attention_runs_on_a_fused_sdpa_kernel(dtype):
    """Window attention with its bias and shift mask reaches SDPA's fused
    memory-efficient kernel (the math fallback is excluded: a form it
    cannot take would raise 'No available kernel')."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    _, gpu = _pair('swin-cyclic')
    x = torch.randn(2, 3, 128, 128, device='cuda')
    with torch.no_grad(), torch.autocast('cuda', dtype=DTYPES[dtype]), \
            sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION,
                         SDPBackend.FLASH_ATTENTION,
                         SDPBackend.CUDNN_ATTENTION]):
        outs = gpu.eval()(x)
    assert all(torch.isfinite(o).all() for o in outs)


def test_bf16_amp_optim_wrapper_runs_mmcv_ops_in_fp32_on_cuda():
    """``mmvisattn.AmpOptimWrapper`` in bf16 on CUDA (as ``tools/train.py
    --amp-dtype bfloat16`` builds it): mmcv's RoIAlign and NMS, which have
    no bf16 CUDA kernels, run inside its ``optim_context``, the step
    backpropagates through them, and mmcv's functions are their own
    again afterwards."""
    from mmcv.ops import nms, roi_align
    from mmcv.ops.roi_align import RoIAlignFunction
    from mmengine.optim import build_optim_wrapper

    from mmvisattn.environment import mmcv_ops_fp32_state
    original = RoIAlignFunction.__dict__['forward']
    model = torch.nn.Conv2d(8, 8, 1).cuda()
    wrapper = build_optim_wrapper(model, dict(
        type='mmvisattn.AmpOptimWrapper', dtype='bfloat16',
        optimizer=dict(type='SGD', lr=0.1)))
    rois = torch.tensor([[0, 1., 1., 9., 12.]], device='cuda')
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30.]],
                         device='cuda')
    with wrapper.optim_context(model):
        feats = model(torch.rand(1, 8, 16, 16, device='cuda'))
        out = roi_align(feats, rois, (7, 7), 1.0, 0)
        _, keep = nms(boxes.bfloat16(), torch.tensor(
            [0.9, 0.8, 0.7], device='cuda').bfloat16(), 0.5)
    assert feats.dtype == out.dtype == torch.bfloat16
    assert keep.tolist() == [0, 2]
    wrapper.update_params(out.float().mean())
    del out, feats
    assert mmcv_ops_fp32_state() == dict(scopes=0, pending=0,
                                          forward=False, backward=False)
    assert RoIAlignFunction.__dict__['forward'] is original


@pytest.mark.slow  # inductor may start compile worker processes
def test_torch_compile_equals_eager():
    _, gpu = _pair('swin-cyclic')
    gpu.eval()
    x = torch.randn(2, 3, 128, 128, device='cuda')
    compiled = torch.compile(gpu)
    with torch.no_grad():
        for a, b in zip(compiled(x), gpu(x)):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('cuda_shapes'))
    return generate_shapes(root, num_train=8, num_val=3, size=(96, 96))


def _tool(*args):
    proc = subprocess.run([sys.executable, *args], cwd=REPO, timeout=900,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize('amp_dtype', ['float16', 'bfloat16'])
def test_cascade_and_upernet_train_and_test_with_amp(shapes, tmp_path,
                                                     amp_dtype):
    """The demo detector and segmentor, 2 iterations each with mmengine's
    AmpOptimWrapper (fp16 with a dynamic loss scale, or bf16), then
    evaluated with ``tools/test.py --amp``."""
    det = osp.join(REPO, 'configs', 'demo',
                   'cascade-mask-rcnn_swin-t_shapes.py')
    seg = osp.join(REPO, 'configs', 'demo', 'upernet_swin-t_shapes-ade.py')
    runs = {
        det: ['--cfg-options', f'data_root={shapes}/',
              f'train_dataloader.dataset.data_root={shapes}/',
              f'test_dataloader.dataset.data_root={shapes}/',
              f'test_evaluator.ann_file={shapes}/annotations/'
              'instances_val.json', 'train_cfg.max_iters=2',
              'default_hooks.checkpoint.interval=2',
              'model.test_cfg.rcnn.score_thr=0.0'],
        seg: ['--cfg-options', f'train_dataloader.dataset.data_root={shapes}/ade/',
              f'test_dataloader.dataset.data_root={shapes}/ade/',
              'train_cfg.max_iters=2', 'default_hooks.checkpoint.interval=2'],
    }
    for config, options in runs.items():
        work = str(tmp_path / osp.basename(config))
        log = _tool('tools/train.py', config, '--work-dir', work, '--amp',
                    '--amp-dtype', amp_dtype, *options)
        assert f'optim_wrapper.type = mmvisattn.AmpOptimWrapper ' \
            f'({amp_dtype}' in log
        _tool('tools/test.py', config, osp.join(work, 'iter_2.pth'),
              '--work-dir', work, '--amp', *options)
