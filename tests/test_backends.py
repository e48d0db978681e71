"""The CPU fast path is a backend (``mmvisattn.ops.backend``): one predicate
decides where it may run, and in every mode a model meets its outputs and
gradients equal the plain path's (``use_backend('plain')``).

Each backbone is built once, with DropPath on and small MLP/attention
chunks (so the chunked, in-place paths run on small inputs), and walked
through: train, eval, ``no_grad`` in train mode, ``no_grad`` in eval,
``inference_mode``, an EMA swap through ``.data``, and bf16 autocast. The
same seed before both runs makes DropPath and dropout draw the same masks,
so a path that skipped one (the fast path once did, for the MLP under
``no_grad`` in train mode) differs.
"""
import copy

import pytest
import torch
import torch.nn as nn

import mmvisattn  # noqa: F401
from mmvisattn.ops import fast_path_allowed, use_backend
from mmvisattn.registry import MODELS

SMALL_CHUNKS = dict(chunk_tokens=64)
SWIN = dict(type='SwinTransformer', arch=dict(
    embed_dims=32, depths=(2, 2), num_heads=(2, 4)), out_indices=(0, 1),
    drop_path_rate=0.3)
BACKBONES = {
    'swin-window': dict(SWIN, attn_cfg=dict(SMALL_CHUNKS)),
    'swin-padding': dict(SWIN, attn_cfg=dict(
        SMALL_CHUNKS, type='WindowAttention', shift_mode='padding')),
    'swin-halo-sliding': dict(SWIN, attn_cfg=dict(
        SMALL_CHUNKS, type='HaloSlidingWindowAttention')),
    'swin-sliding': dict(SWIN, attn_cfg=dict(
        SMALL_CHUNKS, type='SlidingWindowAttention')),
    'swin-performer': dict(SWIN, use_abs_pos_embed=True, attn_cfg=dict(
        SMALL_CHUNKS, type='PerformerAttention')),
    'swin-global-block': dict(SWIN, extra_global_block=True,
                              attn_cfg=dict(SMALL_CHUNKS)),
    'swinv2': dict(SWIN, type='SwinTransformerV2', window_size=4,
                   attn_cfg=dict(SMALL_CHUNKS)),
    'tnt-pyramid': dict(type='TNT', arch='small', out_type='pyramid',
                        img_size=64, drop_path_rate=0.3),
    'rswatt': dict(type='RSWAttTransformer', arch=dict(
        embed_dims=32, depths=(2, 2), num_heads=(2, 4)),
        out_indices=(0, 1), drop_path_rate=0.3),
    'rswatt-vit': dict(type='RSWAttViT', arch=dict(
        embed_dims=32, depth=2, num_heads=2), img_size=64,
        out_type='featmap', drop_path_rate=0.3),
}
SHAPE = (2, 3, 64, 96)


@pytest.fixture(scope='module', params=sorted(BACKBONES))
def model(request):
    torch.manual_seed(0)
    model = MODELS.build(copy.deepcopy(BACKBONES[request.param]))
    model.init_weights()
    return model


def _outputs(model, x, backend, seed=1):
    torch.manual_seed(seed)  # the same DropPath masks on both paths
    with use_backend(backend):
        outs = model(x)
    return outs if isinstance(outs, (tuple, list)) else (outs, )


def _assert_same(fast, plain, atol=1e-5, rtol=1e-5):
    assert len(fast) == len(plain)
    for a, b in zip(fast, plain):
        torch.testing.assert_close(a.float(), b.float(), atol=atol,
                                   rtol=rtol)


def test_train_mode_with_and_without_gradients(model):
    model.train()
    x = torch.randn(SHAPE)
    grads = []
    for backend in ('auto', 'plain'):
        model.zero_grad()
        outs = _outputs(model, x, backend)
        sum(o.square().mean() for o in outs).backward()
        grads.append([p.grad.clone() for p in model.parameters()
                      if p.grad is not None])
        with torch.no_grad():  # train mode: DropPath still drops
            grads[-1].append(_outputs(model, x, backend))
    *fast_grads, fast_nograd = grads[0]
    *plain_grads, plain_nograd = grads[1]
    # the reference: autograd on, plain backend, the same DropPath masks
    reference = [o.detach() for o in _outputs(model, x, 'plain')]
    _assert_same(fast_nograd, reference)
    _assert_same(plain_nograd, reference)
    assert len(fast_grads) == len(plain_grads) > 0
    for a, b in zip(fast_grads, plain_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_eval_modes(model):
    model.eval()
    x = torch.randn(SHAPE)
    # the reference: autograd on, plain backend
    plain = [o.detach() for o in _outputs(model, x, 'plain')]
    with torch.no_grad():
        _assert_same(_outputs(model, x, 'auto'), plain)
    with torch.inference_mode():
        _assert_same(_outputs(model, x, 'auto'), plain)
    _assert_same(_outputs(model, x, 'auto'), plain)


def test_ema_swap_through_data(model):
    """mmengine's EMAHook swaps weights in place through ``.data`` (no
    version bump); the next forward on the fast path sees them."""
    model.eval()
    x = torch.randn(SHAPE)
    with torch.inference_mode():
        before = _outputs(model, x, 'auto')
    saved = [p.data.clone() for p in model.parameters()]
    try:
        for p in model.parameters():
            p.data.copy_(p.data + 0.05 * torch.randn_like(p))
        with torch.inference_mode():
            fast = _outputs(model, x, 'auto')
        with torch.no_grad():
            plain = _outputs(model, x, 'plain')
    finally:
        for p, value in zip(model.parameters(), saved):
            p.data.copy_(value)
    _assert_same(fast, plain)
    assert not torch.allclose(fast[-1], before[-1], atol=1e-3)


def test_bf16_autocast(model):
    """Under bf16 autocast the fast path packs its linears as bf16 (where
    oneDNN has native bf16) and stays within bf16's rounding of the plain
    path, whose linears autocast casts per call."""
    model.eval()
    x = torch.randn(SHAPE)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        fast = _outputs(model, x, 'auto')
        plain = _outputs(model, x, 'plain')
    for a, b in zip(fast, plain):
        assert torch.isfinite(a).all()
        rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
        assert rel < 0.02, rel


def test_the_predicate_names_every_mode():
    block = nn.Linear(4, 4)
    frozen = nn.Linear(4, 4).requires_grad_(False)
    x = torch.randn(2, 4)
    block.eval()
    frozen.eval()
    assert fast_path_allowed(block, x) is False  # autograd wants grads
    assert fast_path_allowed(frozen, x) is True  # a frozen stage in eval
    assert fast_path_allowed(frozen, x.requires_grad_()) is False
    with torch.no_grad():
        assert fast_path_allowed(block, x) is True
        with use_backend('plain'):
            assert fast_path_allowed(block, x) is False
        block.train()  # DropPath and dropout are live in train mode
        assert fast_path_allowed(block, x) is False
    block.eval()
    with torch.inference_mode():
        assert fast_path_allowed(block, x) is True
        # off the CPU (a GPU; here the meta device) the plain path runs
        assert fast_path_allowed(block, x.to('meta')) is False
    with pytest.raises(ValueError, match="'fast'"):
        with use_backend('fast'):
            pass


def test_rswatt_plugin_packs_its_linears_on_the_fast_path(monkeypatch):
    """The plug-in (and so the neck and heads built from it) runs its
    attention's linears packed inside the fast path, for its call only,
    and equals the plain path."""
    from mmvisattn.ops import linear
    if not linear._ONEDNN:
        pytest.skip('this torch has no oneDNN linear: no packed path')
    torch.manual_seed(0)
    plugin = MODELS.build(dict(type='RSWAttPlugin', in_channels=64,
                               init_scale=1.)).eval()
    plugin.init_weights()
    packed = []
    reorder = linear.pack_weight
    monkeypatch.setattr(linear, 'pack_weight',
                        lambda w, rows: packed.append(w.shape) or
                        reorder(w, rows))
    x = torch.randn(2, 64, 24, 32)  # 1536 rows: enough to be packed
    with torch.no_grad():
        fast = plugin(x)
        assert packed  # qkv and proj, packed once each
        assert getattr(linear._LOCAL, 'packed', None) is None
        count = len(packed)
        plain = _outputs(plugin, x, 'plain')[0]
        assert len(packed) == count  # the plain path packs nothing
    _assert_same((fast, ), (plain, ))
    plugin.train()
    with torch.no_grad():
        plugin(x)
    assert len(packed) == count  # train mode: never packed


@pytest.mark.parametrize('part', ['packed_linears', 'window_chunks',
                                  'mlp_chunks', 'fused_gelu'])
def test_each_fast_part_switches_off_alone(part, monkeypatch):
    """``use_backend('auto', without=(part, ))`` (what
    benchmark_backbone.py --ablate measures) turns that part off and no
    other: counted at each part's entry; the outputs stay the plain
    path's."""
    from mmvisattn.models.layers import Mlp, WindowAttention, mlp
    from mmvisattn.ops import FAST_PARTS, linear
    assert part in FAST_PARTS
    # stage 0: 768 tokens, chunked in 512 MLP rows, packed (>= 512)
    model = MODELS.build(dict(SWIN, drop_path_rate=0.,
                              attn_cfg=dict(chunk_tokens=512))).eval()
    x = torch.randn(1, 3, 96, 128)
    calls = dict.fromkeys(FAST_PARTS, 0)

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(linear, 'pack_weight',
                        counted('packed_linears', linear.pack_weight))
    monkeypatch.setattr(WindowAttention, 'attend_in_chunks',
                        counted('window_chunks',
                                WindowAttention.attend_in_chunks))
    monkeypatch.setattr(Mlp, 'forward_in_chunks',
                        counted('mlp_chunks', Mlp.forward_in_chunks))
    monkeypatch.setattr(mlp, 'packable_linear',
                        counted('fused_gelu', mlp.packable_linear))
    with torch.no_grad():
        want = _outputs(model, x, 'plain')
        with use_backend('auto', without=(part, )):
            got = model(x)
    assert calls[part] == 0
    assert all(calls[other] for other in FAST_PARTS if other != part), calls
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match='packed_linears'):
        with use_backend('auto', without=('chunks', )):
            pass


def test_forward_hooks_fire_on_every_linear_as_on_the_plain_path():
    """The fast parts live behind their modules' own ``forward``: in a CPU
    ``inference_mode`` forward every ``nn.Linear`` of a Swin (with its
    merging layers) fires its forward hooks, and what each saw (the
    outputs of its calls, chunk after chunk, in order) is what it sees on
    the plain path."""
    # 1280 tokens at stage 0: chunks of 20 windows (980 rows) and of 1024
    # MLP rows, every linear of the stage packed
    model = MODELS.build(dict(SWIN, drop_path_rate=0.,
                              attn_cfg=dict(chunk_tokens=1024))).eval()
    linears = {name: m for name, m in model.named_modules()
               if isinstance(m, nn.Linear)}
    seen = {}

    def record(name):
        def hook(module, args, out):
            seen.setdefault(name, []).append(
                out.detach().reshape(-1, out.shape[-1]).clone())
        return hook

    handles = [m.register_forward_hook(record(name))
               for name, m in linears.items()]
    x = torch.randn(1, 3, 128, 160)
    runs = {}
    for backend in ('auto', 'plain'):
        seen = {}
        with torch.inference_mode(), use_backend(backend):
            model(x)
        runs[backend] = {k: torch.cat(v) for k, v in seen.items()}
    for handle in handles:
        handle.remove()
    assert set(runs['auto']) == set(runs['plain']) == set(linears)
    for name in linears:
        torch.testing.assert_close(runs['auto'][name], runs['plain'][name],
                                   rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize('approximate', ['none', 'tanh'])
@pytest.mark.parametrize('amp', [False, True])
def test_fused_gelu_matches_fc1_then_the_activation(approximate, amp,
                                                    monkeypatch):
    """The ``'fused_gelu'`` part computes the MLP's GELU in fc1's packed
    GEMM (oneDNN's post-op): with rows enough to pack (>= 1024, bf16's
    threshold too), in fp32 and under bf16 autocast, the MLP's output is
    the plain path's, and fc1 is packed on the way."""
    from mmvisattn.models.layers import Mlp
    from mmvisattn.ops import linear
    torch.manual_seed(0)
    mlp = Mlp(32, 128, act_cfg=dict(type='GELU', approximate=approximate),
              chunk_rows=4096).eval()
    assert mlp.fusable_gelu == approximate
    packed = []
    monkeypatch.setattr(linear, 'pack_weight',
                        lambda w, rows, pack=linear.pack_weight:
                        packed.append(tuple(w.shape)) or pack(w, rows))
    fc1_calls = []
    monkeypatch.setattr(mlp.fc1, 'forward', lambda x, forward=mlp.fc1.forward:
                        fc1_calls.append(1) or forward(x))
    x = torch.randn(2, 600, 32)
    with torch.no_grad(), torch.autocast('cpu', torch.bfloat16,
                                         enabled=amp):
        fast = mlp(x)
        assert not fc1_calls  # computed without calling fc1
        if not amp or linear._ONEDNN_BF16:  # bf16 packs where it is native
            assert packed[0] == (128, 32)  # fused into fc1's packed GEMM
        plain = _outputs(mlp, x, 'plain')[0]
        unfused = mlp.drop2(mlp.fc2(mlp.act(mlp.fc1(x))))
    tol = dict(atol=3e-2, rtol=3e-2) if amp else dict(atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast.float(), plain.float(), **tol)
    torch.testing.assert_close(plain, unfused)


def test_the_fused_gelu_steps_aside_where_a_hook_observes_fc1_or_act():
    """A hook (on fc1, on the activation, or a global one) would miss the
    calls the fused GELU skips: with one, fc1 and act run as modules;
    without, neither is called."""
    from torch.nn.modules.module import register_module_forward_hook

    from mmvisattn.models.layers import Mlp
    mlp = Mlp(32, 128).eval()
    x = torch.randn(1, 1024, 32)
    calls = []

    def record(module, args, out):
        calls.append(module)

    with torch.no_grad():
        for target in (mlp.fc1, mlp.act):
            calls.clear()
            handle = target.register_forward_hook(record)
            mlp(x)
            handle.remove()
            assert calls == [target]
        calls.clear()
        handle = register_module_forward_hook(record)
        mlp(x)
        handle.remove()
        assert mlp.fc1 in calls and mlp.act in calls
        # unobserved: fused, fc1 and act never called as modules
        calls.clear()
        handle = mlp.fc2.register_forward_hook(record)
        mlp(x)
        handle.remove()
        assert calls == [mlp.fc2]


def test_mlp_adds_its_identity_after_droppath_as_mmcv_ffn():
    """``Mlp(x, identity)`` is mmcv's ``FFN(add_identity=True)`` with a
    DropPath ``dropout_layer`` (what mmdet's and mmseg's Swin blocks call):
    the same weights and seed give the same output in train mode (DropPath
    drawing), in eval mode, and on the chunked inference path."""
    from mmcv.cnn.bricks.transformer import FFN

    from mmvisattn.models.layers import Mlp
    torch.manual_seed(0)
    ffn = FFN(32, 128, act_cfg=dict(type='GELU'),
              dropout_layer=dict(type='DropPath', drop_prob=0.5),
              add_identity=True)
    mlp = Mlp(32, 128, drop_path_rate=0.5, chunk_rows=64)
    mlp.fc1.load_state_dict(ffn.layers[0][0].state_dict())
    mlp.fc2.load_state_dict(ffn.layers[1].state_dict())
    x, identity = torch.randn(4, 100, 32), torch.randn(4, 100, 32)
    for train in (True, False):
        ffn.train(train), mlp.train(train)
        torch.manual_seed(1)
        want = ffn(x, identity=identity)
        torch.manual_seed(1)
        got = mlp(x, identity=identity)
        torch.testing.assert_close(got, want)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x, identity=identity),
                                   ffn(x, identity=identity))
