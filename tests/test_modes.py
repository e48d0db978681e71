"""Caches in every mode (issue: caches that cannot go stale).

The backbones keep three kinds of cached state: shape-derived tensors
(window layouts, masks, halo tiles, index tensors; ``mmvisattn.ops.cache.
shape_cache``), packed weights for CPU inference (one block call's lifetime,
``mmvisattn.ops.linear.packed_weights_scope``) and, before, the gathered
relative-position bias. Each test below failed on the previous design:
- a forward under ``torch.inference_mode()`` cached inference tensors, and
  training at the same size then raised "Inference tensors cannot be saved
  for backward";
- mmengine's ``EMAHook`` swaps the EMA weights in through ``.data`` (no
  version bump), and the cached bias/packed weights kept the old values
  (outputs off by up to 0.36).
"""
import copy
import types

import pytest
import torch
from mmengine.hooks import EMAHook

import mmvisattn  # noqa: F401
from helpers import sampled
from helpers.backbones import AUTOCAST_BACKBONES, BACKBONES
from mmvisattn.registry import MODELS

SHAPE = (1, 3, 96, 128)


def _build(name, seed=0):
    torch.manual_seed(seed)
    model = MODELS.build(copy.deepcopy(BACKBONES[name]))
    model.init_weights()
    return model


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_training_after_an_inference_mode_forward(name):
    model = _build(name).eval()
    x = torch.randn(SHAPE)
    with torch.inference_mode():
        model(x)
    model.train()
    loss = sum(out.square().mean() for out in model(x))
    loss.backward()  # raised on inference tensors kept in a cache
    assert all(p.grad is not None for p in model.parameters()
               if p.requires_grad)
    # and back: inference after training, the same as a fresh no_grad run
    model.eval()
    with torch.inference_mode():
        fast = model(x)
    with torch.no_grad():
        again = model(x)
    for a, b in zip(fast, again):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('name',
                         ['swin-cyclic', 'swin-sliding', 'swinv2', 'rswatt'])
def test_ema_swap_validates_with_the_ema_weights(name):
    """mmengine's own EMAHook: validation after its swap equals a model
    loaded with the EMA weights, and after the swap back the original
    outputs return, with forwards in between as a validation loop runs
    them (inference mode, the CPU fast path)."""
    model = _build(name).eval()
    x = torch.randn(SHAPE)
    with torch.inference_mode():
        before = model(x)
    hook = EMAHook(momentum=0.5)
    runner = types.SimpleNamespace(model=model)
    hook.before_run(runner)  # its deep copy of the model
    with torch.no_grad():  # what training would have averaged in
        for p in hook.ema_model.module.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ema_state = copy.deepcopy(hook.ema_model.module.state_dict())
    hook.before_val_epoch(runner)
    with torch.inference_mode():
        swapped = model(x)
    fresh = _build(name, seed=1)
    fresh.load_state_dict(ema_state)
    with torch.inference_mode():
        want = fresh.eval()(x)
    for a, b in zip(swapped, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(swapped[-1], before[-1], atol=1e-3)
    hook.after_val_epoch(runner)
    with torch.inference_mode():
        back = model(x)
    for a, b in zip(back, before):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_packed_weights_live_for_one_forward(monkeypatch):
    """The packed copies exist only while a block runs (each linear packed
    once per forward, however many chunks call it); a weight changed
    through ``.data`` between two forwards is seen by the next."""
    from mmvisattn.ops import linear
    if not linear._ONEDNN:
        pytest.skip('this torch has no oneDNN linear: no packed path')
    model = _build('swin-cyclic').eval()
    # stage 1 of 160x224 has 2240 tokens: enough rows to be packed
    # (ops.linear._MIN_PACK_ROWS)
    x = torch.randn(1, 3, 160, 224)
    packs = []
    reorder = torch.ops.mkldnn._reorder_linear_weight

    def counting(weight, rows):
        packs.append(weight.data_ptr())
        return reorder(weight, rows)

    monkeypatch.setattr(linear, 'pack_weight', counting, raising=False)
    with torch.no_grad():
        first = model(x)
        linears = {m.weight.data_ptr() for m in model.modules()
                   if isinstance(m, torch.nn.Linear)}
        assert packs and set(packs) <= linears
        assert len(packs) == len(set(packs))  # once per forward each
        assert getattr(linear._LOCAL, 'packed', None) is None
        for p in model.parameters():
            p.data.mul_(1.1)
        second = model(x)
        third = _build('swin-cyclic').eval()
        third.load_state_dict(model.state_dict())
        want = third(x)
    assert not torch.allclose(first[-1], second[-1], atol=1e-3)
    for a, b in zip(second, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def _fp32_layer_norms(model):
    def to_fp32(module, args, out):
        return out.float()

    return [m.register_forward_hook(to_fp32) for m in model.modules()
            if isinstance(m, torch.nn.LayerNorm)]


# bf16 (the CPU's autocast dtype) for every family in the fast tier; fp16
# (emulated and slow on the CPU) for Swin there, for the rest in the slow one
@pytest.mark.parametrize(
    'name,dtype',
    sampled([(n, d) for n in sorted(AUTOCAST_BACKBONES)
             for d in (torch.float16, torch.bfloat16)],
            lambda nd: nd[1] == torch.bfloat16 or nd[0] == 'swin-cyclic',
            ids=[f'{n}-{d}' for n in sorted(AUTOCAST_BACKBONES)
                 for d in ('fp16', 'bf16')]))
def test_autocast_equals_fp32(name, dtype):
    """Autocast inference (the eval fast path, which scatter-adds window
    outputs into the residual) and a training backward run in fp16 and
    bf16, stay finite, and equal fp32 within the precision's tolerance."""
    torch.manual_seed(0)
    model = MODELS.build(copy.deepcopy(AUTOCAST_BACKBONES[name]))
    model.init_weights()
    model.eval()
    x = torch.randn(1, 3, 128, 128)
    with torch.no_grad():
        want = model(x)
    hooks = _fp32_layer_norms(model)
    with torch.no_grad(), torch.autocast('cpu', dtype=dtype):
        got = model(x)
    # bf16 keeps 8 bits of mantissa; fp16 keeps 11
    tol = 0.05 if dtype == torch.bfloat16 else 0.01
    for a, b in zip(got, want):
        assert torch.isfinite(a).all()
        err = (a.float() - b).abs().max() / b.abs().max()
        assert err < tol, (name, float(err))
    model.train()
    with torch.autocast('cpu', dtype=dtype):
        loss = sum(out.float().square().mean() for out in model(x))
    loss.backward()
    for h in hooks:
        h.remove()
    assert torch.isfinite(loss)
    for pname, p in model.named_parameters():
        if p.grad is not None:
            assert torch.isfinite(p.grad).all(), pname
