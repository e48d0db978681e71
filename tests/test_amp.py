"""Mixed precision as users ask for it: ``tools/train.py --amp`` /
``--amp-dtype`` and ``tools/test.py --amp`` on a CPU (bf16 through
``mmvisattn.BF16OptimWrapper`` and mmengine's autocast), and mmcv's
compiled ops under a bf16 autocast (they have no bf16 kernels). The CUDA
side (fp16 ``AmpOptimWrapper``) is in test_cuda.py."""
import importlib.util
import json
import os
import os.path as osp
import subprocess
import sys
from contextlib import contextmanager

import pytest
import torch
from mmengine.config import Config

import mmvisattn  # noqa: F401
from helpers import REPO, generate_shapes, load_tool, skip_weight_init
from helpers.seg_config import small_seg_config, tool_env


def _train_tool():
    spec = importlib.util.spec_from_file_location(
        'train_tool', osp.join(REPO, 'tools', 'train.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason='the CPU choice')
def test_amp_on_a_cpu_is_bf16_through_an_optim_wrapper():
    tool = _train_tool()
    cfg = Config(dict(optim_wrapper=dict(
        type='OptimWrapper', loss_scale='dynamic',
        optimizer=dict(type='AdamW', lr=1e-4))))
    changes = tool.mixed_precision(cfg)
    assert cfg.optim_wrapper.type == 'mmvisattn.BF16OptimWrapper'
    assert 'loss_scale' not in cfg.optim_wrapper
    assert 'bfloat16' in changes[0]
    with pytest.raises(SystemExit, match='CPU autocast runs bfloat16 only'):
        tool.mixed_precision(cfg, 'float16')


def test_bf16_optim_wrapper_autocasts_the_forward():
    """Built by mmengine's own builder from the config's name; the forward
    under its ``optim_context`` runs in bf16, weights stay fp32."""
    from mmengine.optim import build_optim_wrapper

    from mmvisattn.registry import MODELS
    model = MODELS.build(dict(type='SwinTransformer', embed_dims=16,
                              depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2)))
    wrapper = build_optim_wrapper(model, dict(
        type='mmvisattn.BF16OptimWrapper',
        optimizer=dict(type='AdamW', lr=1e-3)))
    x = torch.rand(1, 3, 32, 32)
    with wrapper.optim_context(model):
        out = model(x)
    assert all(o.dtype == torch.bfloat16 for o in out)
    wrapper.update_params(sum(o.float().mean() for o in out))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model(x)[0].dtype == torch.float32  # outside: untouched
    with pytest.raises(ValueError, match='float16 needs a loss scaler'):
        build_optim_wrapper(model, dict(
            type='mmvisattn.BF16OptimWrapper', dtype='float16',
            optimizer=dict(type='AdamW', lr=1e-3)))


def test_mmcv_ops_run_in_fp32_under_a_bf16_autocast():
    """RoIAlign, NMS and a deformable conv have no bf16 kernels: inside
    ``mmcv_ops_fp32_under_bf16`` under a bf16 autocast they run in fp32
    and hand bf16 back (forward and backward, the backward after the
    context is left); fp16 and no autocast reach the kernels unchanged."""
    from mmcv.ops import DeformConv2d, nms, roi_align

    from mmvisattn.environment import mmcv_ops_fp32_under_bf16
    torch.manual_seed(0)
    x = torch.rand(1, 8, 16, 16, requires_grad=True)
    rois = torch.tensor([[0, 1., 1., 9., 12.]])
    want = roi_align(x, rois, (7, 7), 1.0, 0)
    with mmcv_ops_fp32_under_bf16(), mmcv_ops_fp32_under_bf16(), \
            torch.autocast('cpu', dtype=torch.bfloat16):  # re-entrant
        feats = torch.nn.functional.conv2d(x, torch.eye(8)[..., None, None])
        got = roi_align(feats, rois, (7, 7), 1.0, 0)
        dconv = DeformConv2d(8, 4, 3, padding=1)
        out = dconv(feats, torch.zeros(1, 18, 16, 16))
    assert got.dtype == torch.bfloat16 and out.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    (got.float().sum() + out.float().sum()).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert dconv.weight.grad.dtype == torch.float32
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30.]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    with mmcv_ops_fp32_under_bf16(), \
            torch.autocast('cpu', dtype=torch.bfloat16):
        _, keep = nms(boxes.bfloat16(), scores.bfloat16(), 0.5)
    assert keep.tolist() == [0, 2]


def _mmcv_originals():
    from mmcv.ops.deform_conv import DeformConv2dFunction
    from mmcv.ops.roi_align import RoIAlignFunction
    return {(fn, kind): fn.__dict__[kind]
            for fn in (RoIAlignFunction, DeformConv2dFunction)
            for kind in ('forward', 'backward')}


def _assert_untouched(originals):
    from mmvisattn.environment import mmcv_ops_fp32_state
    assert mmcv_ops_fp32_state() == dict(scopes=0, pending=0,
                                          forward=False, backward=False)
    for (fn, kind), original in originals.items():
        assert fn.__dict__[kind] is original, (fn, kind)


def _roi_step(wrapper, model):
    """One Runner-free step as mmengine's ``train_step`` takes it: the
    forward (a conv, then mmcv's RoIAlign) in ``optim_context``, then
    ``update_params``; what it sees inside, and the output dtype."""
    from mmcv.ops import roi_align

    from mmvisattn.environment import mmcv_ops_fp32_state
    rois = torch.tensor([[0, 1., 1., 9., 12.]])
    with wrapper.optim_context(model):
        inside = mmcv_ops_fp32_state()
        out = roi_align(model(torch.rand(1, 8, 16, 16)), rois, (7, 7), 1.0,
                        0)
    dtype = out.dtype
    wrapper.update_params(out.float().mean())
    return inside, dtype


def _amp_optim_wrapper(model, **cfg):
    """mmengine's own ``AmpOptimWrapper`` built from a config on this CPU
    (its GPU assertion passed; the loss scaler disables itself)."""
    import warnings
    from unittest import mock

    import mmengine.optim.optimizer.amp_optimizer_wrapper as amp
    from mmengine.optim import build_optim_wrapper
    with mock.patch.object(amp, 'is_cuda_available', return_value=True), \
            warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the scaler: no CUDA, disabled
        return build_optim_wrapper(model, dict(
            optimizer=dict(type='SGD', lr=0.1), **cfg))


CPU_ONLY = pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="mmengine's autocast picks the GPU here; the CUDA bf16 "
    'AmpOptimWrapper is in test_cuda.py')


@CPU_ONLY
@pytest.mark.parametrize('cfg', [
    dict(type='mmvisattn.AmpOptimWrapper', dtype='bfloat16'),
    dict(type='mmvisattn.AmpOptimWrapper', dtype=torch.bfloat16),
    dict(type='mmvisattn.AmpOptimWrapper', dtype='bfloat16', subclass=True),
    dict(type='mmvisattn.BF16OptimWrapper'),
], ids=['name', 'torch-dtype', 'subclass', 'cpu-bf16'])
def test_bf16_optim_wrapper_runs_mmcv_ops_in_fp32_inside_its_context_only(
        cfg):
    """A bf16 wrapper of ours, however named (a subclass too): mmcv's
    functions are wrapped inside its ``optim_context`` only, a real mmcv op
    (RoIAlign) runs there in bf16 autocast and its backward works in
    ``update_params`` after it, and afterwards mmcv's classes hold their
    own forward/backward again."""
    from mmengine.runner.amp import autocast

    from mmvisattn.engine import AmpOptimWrapper
    originals = _mmcv_originals()
    _assert_untouched(originals)
    model = torch.nn.Conv2d(8, 8, 1)
    cfg = dict(cfg)
    if cfg.pop('subclass', False):
        class MyAmp(AmpOptimWrapper):
            @contextmanager
            def optim_context(self, model):
                with super().optim_context(model):
                    yield
        cfg['type'] = MyAmp  # a class in the config, as a user's own
    if cfg['type'] == 'mmvisattn.BF16OptimWrapper':
        from mmengine.optim import build_optim_wrapper
        wrapper = build_optim_wrapper(model, dict(
            optimizer=dict(type='SGD', lr=0.1), **cfg))
    else:
        wrapper = _amp_optim_wrapper(model, **cfg)
    assert wrapper.cast_dtype == torch.bfloat16
    before = model.weight.detach().clone()
    inside, dtype = _roi_step(wrapper, model)
    assert inside == dict(scopes=1, pending=0, forward=True, backward=True)
    assert dtype == torch.bfloat16
    assert not torch.equal(model.weight, before)  # the step was taken
    _assert_untouched(originals)
    # outside the wrapper a bf16 autocast reaches mmcv's kernel as before
    from mmcv.ops import roi_align
    with pytest.raises(RuntimeError, match='BFloat16'), \
            autocast(dtype=torch.bfloat16):
        roi_align(model(torch.rand(1, 8, 16, 16)),
                  torch.tensor([[0, 1., 1., 9., 12.]]), (7, 7), 1.0, 0)


@pytest.mark.parametrize('type_', ['mmvisattn.AmpOptimWrapper',
                                   'AmpOptimWrapper'])
@pytest.mark.parametrize('dtype', ['float16', None, 'bfloat16'])
def test_fp16_default_and_mmengines_amp_optim_wrapper_leave_mmcv_alone(
        dtype, type_, monkeypatch):
    """Ours in fp16 and by default, and mmengine's own in any dtype (it is
    mmengine's, unchanged by the import), never touch mmcv. (mmengine's
    autocast is stubbed: CPU autocast has no fp16.)"""
    import contextlib

    import mmengine.runner.amp
    if dtype == 'bfloat16' and type_.startswith('mmvisattn'):
        pytest.skip('ours in bf16: the test above')
    originals = _mmcv_originals()
    model = torch.nn.Conv2d(8, 8, 1)
    wrapper = _amp_optim_wrapper(model, type=type_, dtype=dtype)
    asked = []
    monkeypatch.setattr(mmengine.runner.amp, 'autocast', lambda **kw: (
        asked.append(kw), contextlib.nullcontext())[1])
    with wrapper.optim_context(model):
        _assert_untouched(originals)
    assert asked == [dict(dtype=dtype and getattr(torch, dtype))]
    from mmengine.optim import build_optim_wrapper
    plain = build_optim_wrapper(model, dict(
        type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1)))
    with plain.optim_context(model):
        _assert_untouched(originals)


def test_a_graph_built_inside_backpropagates_after_the_context():
    """``loss.backward()`` called directly after the context (not through
    the wrapper) still gets fp32 gradients into mmcv's kernels; the
    original backward returns once the graph is dropped."""
    from mmcv.ops import roi_align

    from mmvisattn.environment import mmcv_ops_fp32_state, mmcv_ops_fp32_under_bf16
    originals = _mmcv_originals()
    x = torch.rand(1, 8, 16, 16, requires_grad=True)
    with mmcv_ops_fp32_under_bf16(), \
            torch.autocast('cpu', dtype=torch.bfloat16):
        out = roi_align(torch.nn.functional.conv2d(
            x, torch.eye(8)[..., None, None]), torch.tensor(
                [[0, 1., 1., 9., 12.]]), (7, 7), 1.0, 0)
    assert mmcv_ops_fp32_state() == dict(scopes=0, pending=1,
                                          forward=False, backward=True)
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    del out
    _assert_untouched(originals)


@pytest.fixture(scope='module')
def seg_data(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('amp'))
    generate_shapes(root, num_train=4, num_val=2, size=(64, 64))
    return root


@pytest.mark.slow
def test_train_and_test_tools_with_amp_on_a_cpu(seg_data, tmp_path):
    """``tools/train.py --amp`` trains 2 iterations in bf16 (the log says
    which wrapper and why) and ``tools/test.py --amp`` evaluates in bf16."""
    config = small_seg_config(str(tmp_path), osp.join(seg_data, 'ade'), 2,
                              max_iters=2, probe=False, embed_dims=16)
    work = str(tmp_path / 'work')
    train = subprocess.run(
        [sys.executable, 'tools/train.py', config, '--work-dir', work,
         '--amp'], cwd=REPO, env=tool_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=900)
    assert train.returncode == 0, train.stdout[-5000:]
    if not torch.cuda.is_available():
        assert '--amp: optim_wrapper.type = mmvisattn.BF16OptimWrapper' \
            in train.stdout
    test = subprocess.run(
        [sys.executable, 'tools/test.py', config, osp.join(work,
                                                          'iter_2.pth'),
         '--work-dir', work, '--amp'], cwd=REPO, env=tool_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=900)
    assert test.returncode == 0, test.stdout[-5000:]
    assert 'mIoU' in test.stdout


@pytest.mark.slow
def test_gpu_check_script_and_the_apis_it_calls(tmp_path):
    """gpu_check.sh is prepared for a GPU machine but checked here: its
    syntax and that of the scripts it runs; without a GPU, a run that
    tests mmcv's ops on the CPU and reports sections 2-5 as not run; a
    rehearsal of the segmentor section on the CPU (each probe, its figures,
    the ratios); the detector runs' configs as the probe prepares them
    (mmdet's backbone swapped in or only ``type`` changed, one fixed
    Resize, no validation or checkpoints); the flags it passes to each
    tool; the CUDA test module it runs (collected) and the benchmark's
    batch, autocast and compiled paths on the CPU at a tiny size."""
    script = osp.join(REPO, 'dev', 'gpu', 'gpu_check.sh')
    for path in (script, osp.join(REPO, 'tools', 'build_mmcv.sh'),
                 osp.join(REPO, 'dev', 'gpu', 'gpu_wheelhouse.sh')):
        subprocess.run(['bash', '-n', path], check=True)
    env = dict(os.environ, GPU_CHECK_DATA=str(tmp_path / 'data'),
               GPU_CHECK_PARTS='ops detector segmentor benchmark precisions '
               'cuda-tests')
    if not torch.cuda.is_available():  # on a GPU machine it runs for real
        report = tmp_path / 'report.txt'
        run = subprocess.run(
            ['bash', script, str(report)], cwd=REPO, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        assert run.returncode == 0, run.stdout[-3000:]
        text = report.read_text()
        assert '== ops (mmcv CPU and CUDA): exit 0' in text, text[-3000:]
        assert ' passed' in text and 'needs a CUDA GPU' in text
        assert ('sections 2-5 (detector, segmentor, benchmark, precisions, '
                'cuda-tests) are not run') in text
        assert '== cascade' not in text and '== benchmark' not in text
        assert 'gpu_check done' in text and '(none)' in text
        # section 3 rehearsed on the CPU: tiny, bf16 for fp16
        rehearsal = tmp_path / 'rehearsal.txt'
        run = subprocess.run(
            ['bash', script, str(rehearsal)], cwd=REPO, text=True,
            env=dict(env, GPU_CHECK_PARTS='segmentor',
                     GPU_CHECK_REHEARSAL='1'),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        assert run.returncode == 0, run.stdout[-3000:]
        text = rehearsal.read_text()
        for name in ('upernet-mmseg-bfloat16', 'upernet-ours-bfloat16',
                     'upernet-mmseg-type-ours-bfloat16'):
            assert f'== {name}: exit 0' in text, text[-3000:]
            with open(tmp_path / 'rehearsal_logs' / f'{name}.json') as f:
                figures = json.load(f)
            assert figures['iterations'] == 2 and figures['s_per_iter'] > 0
            assert figures['sizes'] == ['64x64']
            assert figures['nonfinite_losses'] == figures['skipped_steps'] \
                == []
        assert text.count('ratio mmvisattn/peer (mmvisattn.SwinTransformer'
                          ' / mmseg.SwinTransformer, bfloat16): s/iter') == 2
    _check_probe_configs(tmp_path)
    text = open(script).read()
    helps = {
        tool: subprocess.run(
            [sys.executable, tool, '--help'], cwd=REPO, check=True,
            stdout=subprocess.PIPE, text=True).stdout
        for tool in ('tools/analysis_tools/benchmark_backbone.py',
                     'dev/gpu/gpu_train_probe.py',
                     'tools/train.py')
    }
    for flag in ('--device', '--infer-batch', '--train-batch',
                 '--amp-dtype', '--infer-shape', '--train-shape'):
        assert flag in text and flag in helps[
            'tools/analysis_tools/benchmark_backbone.py'], flag
    for flag in ('--data-root', '--iters', '--warmup', '--batch-size',
                 '--amp-dtype', '--mmdet-backbone', '--fixed-scale',
                 '--json', '--against', '--work-dir', '--cfg-options'):
        assert flag in text and flag in helps[
            'dev/gpu/gpu_train_probe.py'], flag
    assert '--amp' in helps['tools/train.py']
    collected = subprocess.run(
        [sys.executable, '-m', 'pytest', 'tests/test_cuda.py',
         'tests/test_mmcv_ops.py', '--collect-only', '-q'], cwd=REPO,
        stdout=subprocess.PIPE, text=True)
    assert collected.returncode == 0, collected.stdout[-3000:]
    assert 'test_cascade_and_upernet_train_and_test_with_amp' in \
        collected.stdout
    assert 'test_cuda_op_equals_the_cpu[sigmoid_focal_loss-fp16]' in \
        collected.stdout
    bench = subprocess.run(
        [sys.executable, 'tools/analysis_tools/benchmark_backbone.py',
         '--infer-shape', '32', '32', '--train-shape', '32', '32',
         '--infer-batch', '2', '--train-batch', '2', '--repeats', '1',
         '--amp-dtype', 'bfloat16', '--compile', '--compile-backend',
         'eager', '--ablate'], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=600)
    assert bench.returncode == 0, bench.stdout[-3000:]
    assert 'GEMM 1024^3' in bench.stdout
    assert 'train step 2x3x32x32 ours bfloat16 vs mmdet fp32' in bench.stdout
    for part in ('packed_linears', 'window_chunks', 'mlp_chunks'):
        assert f'inference 2x3x32x32 bfloat16 without {part}' in bench.stdout
    assert 'inference 2x3x32x32 bfloat16 plain path' in bench.stdout
    # the compiled rows' plumbing (inductor itself: docs/benchmarks.md)
    assert ('inference 2x3x32x32 compiled ours vs mmdet, both bfloat16 '
            'compiled') in bench.stdout


def _check_probe_configs(tmp_path):
    """gpu_train_probe.py's configs for section 2, prepared and their
    backbones built: the paper's Cascade config with mmdet's backbone and
    one fixed Resize, mmdet's Mask R-CNN Swin-T with only ``type``
    changed."""
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    from mmdet.registry import MODELS

    from mmvisattn.models.backbones import SwinTransformer
    probe = load_tool(osp.join('dev', 'gpu', 'gpu_train_probe.py'))
    data = generate_shapes(str(tmp_path / 'shapes'), num_train=2,
                           num_val=1, size=(32, 48))
    cascade = osp.join(REPO, 'configs', 'cascade_swin_t_coco.py')
    args = probe.parse_args([cascade, '--data-root', data,
                             '--mmdet-backbone', '--fixed-scale', '1333',
                             '800', '--amp-dtype', 'float32'])
    cfg = probe.prepare(probe.load_config(args.config), args)
    backbone = cfg.model.backbone.to_dict()
    assert backbone['type'] == 'mmdet.SwinTransformer'
    assert (backbone['embed_dims'], tuple(backbone['depths']),
            tuple(backbone['num_heads']), backbone['window_size'],
            backbone['drop_path_rate'], backbone['init_cfg']) == \
        (96, (2, 2, 6, 2), (3, 6, 12, 24), 7, 0.2, None)
    with skip_weight_init():
        assert type(MODELS.build(cfg.model.backbone)) is MMDetSwin
    dataset = cfg.train_dataloader.dataset
    assert [step['type'] for step in dataset.pipeline] == [
        'LoadImageFromFile', 'LoadAnnotations', 'RandomFlip', 'Resize',
        'PackDetInputs']
    assert dataset.pipeline[3]['scale'] == (1333, 800)
    assert dataset.data_root == data and \
        dataset.metainfo['classes'] == ('square', 'circle', 'triangle')
    assert cfg.train_dataloader.batch_size == 2
    assert cfg.train_cfg == dict(type='IterBasedTrainLoop', max_iters=20,
                                 val_interval=21)
    assert cfg.val_cfg is None and cfg.default_hooks.checkpoint is None
    assert [s['type'] for s in cfg.param_scheduler] == ['LinearLR']
    assert cfg.optim_wrapper.type == 'OptimWrapper'
    args = probe.parse_args([
        'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', '--data-root',
        data, '--amp-dtype', 'bfloat16', '--cfg-options',
        'model.backbone.type=mmvisattn.SwinTransformer'])
    cfg = probe.prepare(probe.load_config(args.config), args)
    assert cfg.model.backbone.type == 'mmvisattn.SwinTransformer'
    assert cfg.model.backbone.embed_dims == 96
    with skip_weight_init():
        assert type(MODELS.build(cfg.model.backbone)) is SwinTransformer
    # --amp-dtype as tools/train.py sets it (bf16 on a CPU)
    assert cfg.optim_wrapper.type in ('mmvisattn.AmpOptimWrapper',
                                      'mmvisattn.BF16OptimWrapper')
