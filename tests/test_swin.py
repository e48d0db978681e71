"""Swin Transformer backbone: numerics against mmdet, checkpoints, bad input."""
import copy

import pytest
import torch

from helpers import skip_weight_init
from helpers.checkpoints import official_state_dict
from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.models.utils import swin_to_mmdet


def _init(model, seed=0):
    torch.manual_seed(seed)
    model.init_weights()
    # Non-trivial values everywhere, so a mapping error cannot hide.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'norm' in name or 'relative_position_bias_table' in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.eval()  # mmdet's/mmseg's train() returns None, so no chaining
    return model


@pytest.fixture(scope='module')
def swin_t():
    return _init(SwinTransformer(arch='tiny', drop_path_rate=0.))


@pytest.fixture(scope='module')
def mmdet_swin_t(swin_t):
    """mmdet 3.3.0's own SwinTransformer carrying the same weights, mapped
    with mmdet's own official->mmdet converter."""
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    ref = MMDetSwin(drop_path_rate=0.)
    state = swin_to_mmdet(swin_t.state_dict())
    missing, unexpected = ref.load_state_dict(state, strict=False)
    # mmdet keeps the derived index as a persistent buffer; it builds its own
    assert all(k.endswith('relative_position_index') for k in missing)
    assert not unexpected, unexpected
    ref.eval()
    return ref


# 300x340 and 2x260x270 exceed one chunk of windows and of MLP rows, so the
# chunked inference path (scatter-add residual, packed oneDNN linears) is
# compared too.
@pytest.mark.parametrize('shape', [(1, 3, 224, 224), (2, 3, 160, 96),
                                   (1, 3, 230, 301), (1, 3, 64, 64),
                                   (1, 3, 33, 45), (1, 3, 300, 340),
                                   (2, 3, 260, 270)])
def test_equals_mmdet_swin(swin_t, mmdet_swin_t, shape):
    torch.manual_seed(1)
    x = torch.randn(*shape)
    with torch.no_grad():
        ours = swin_t(x)
        ref = mmdet_swin_t(x)
    assert len(ours) == len(ref) == 4
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_inference_fast_path_equals_autograd_path(swin_t):
    """no_grad takes the fused path (packed linears, residual scatter-add,
    in-place MLP chunks); with autograd on, the plain differentiable one."""
    from mmvisattn.ops import use_backend
    torch.manual_seed(2)
    x = torch.randn(1, 3, 300, 340)
    with torch.no_grad():
        fast = swin_t(x)
    slow = swin_t(x)
    with torch.no_grad(), use_backend('plain'):
        unpacked = swin_t(x)
    for a, b, c in zip(fast, slow, unpacked):
        assert b.requires_grad
        torch.testing.assert_close(a, b.detach(), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a, c, atol=1e-5, rtol=1e-5)


def test_output_pyramid_and_channels(swin_t):
    outs = swin_t(torch.randn(1, 3, 230, 301))
    assert swin_t.out_channels == [96, 192, 384, 768]
    assert [o.shape[1] for o in outs] == swin_t.out_channels
    # strides 4/8/16/32 of the padded input
    assert [tuple(o.shape[2:]) for o in outs] == [(58, 76), (29, 38),
                                                  (15, 19), (8, 10)]


def test_maps_smaller_than_window():
    model = _init(SwinTransformer(arch='tiny', out_indices=(3, )))
    out = model(torch.randn(1, 3, 40, 40))[0]  # stage 4 map is 2x2 < 7x7
    assert out.shape == (1, 768, 2, 2)
    assert torch.isfinite(out).all()


def _save_official(tmp_path, model, name='official.pth', **kwargs):
    path = tmp_path / name
    torch.save({'model': official_state_dict(model, **kwargs)}, path)
    return str(path)


def test_loads_official_release_layout(tmp_path, swin_t):
    path = _save_official(tmp_path, swin_t)
    loaded = SwinTransformer(
        arch='tiny', drop_path_rate=0.,
        init_cfg=dict(type='Pretrained', checkpoint=path))
    loaded.init_weights()
    loaded.eval()
    ours = swin_t.state_dict()
    for key, value in loaded.state_dict().items():
        if key.startswith(('norm0', 'norm1', 'norm2')):
            continue  # output norms the classifier does not have
        torch.testing.assert_close(value, ours[key], msg=key)
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x)[3], swin_t(x)[3])


def test_window_7_checkpoint_into_window_12(tmp_path, swin_t):
    path = _save_official(tmp_path, swin_t)
    model = SwinTransformer(
        arch='tiny', window_size=12,
        init_cfg=dict(type='Pretrained', checkpoint=path))
    model.init_weights()
    table = model.layers[0].blocks[0].attn.relative_position_bias_table
    assert table.shape == (23 * 23, 3)
    # the centre of the resized table is the old zero-offset bias
    old = swin_t.layers[0].blocks[0].attn.relative_position_bias_table
    torch.testing.assert_close(
        table.view(23, 23, 3)[11, 11], old.view(13, 13, 3)[6, 6], atol=0.05,
        rtol=0.05)
    assert model(torch.randn(1, 3, 96, 96))[0].shape == (1, 96, 24, 24)


def test_loads_whole_detector_checkpoint(tmp_path, swin_t):
    state = {f'backbone.{k}': v for k, v in swin_t.state_dict().items()}
    state['neck.lateral_convs.0.conv.weight'] = torch.zeros(1)
    path = tmp_path / 'detector.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    model = SwinTransformer(
        init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, swin_t.state_dict()[key])


def _reference_swin(library):
    if library == 'mmdet':
        from mmdet.models.backbones import SwinTransformer as Ref
        return Ref(drop_path_rate=0.)
    if library == 'mmseg':
        from mmseg.models.backbones import SwinTransformer as Ref
        return Ref(drop_path_rate=0.)
    from mmpretrain.models import SwinTransformer as Ref
    return Ref(arch='tiny', drop_path_rate=0., out_indices=(0, 1, 2, 3),
               pad_small_map=True)  # pad like detection, not shrink


@pytest.mark.parametrize('library', ['mmdet', 'mmseg', 'mmpretrain'])
def test_loads_openmmlab_swin_checkpoints(tmp_path, library):
    """A whole mmdet detector / mmseg segmentor / mmpretrain classifier
    checkpoint (their Swin layout: stages, w_msa, ffn, Unfold-order patch
    merging) loads into ours and gives the same features."""
    ref = _init(_reference_swin(library))
    state = {f'backbone.{k}': v for k, v in ref.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(10, 768)  # not a backbone key
    path = tmp_path / f'{library}.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    ours = SwinTransformer(
        arch='tiny', drop_path_rate=0.,
        init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    ours.init_weights()
    ours.eval()
    x = torch.randn(1, 3, 160, 224)
    with torch.no_grad():
        for a, b in zip(ours(x), ref(x)):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_wrong_architecture_checkpoint_is_refused(tmp_path):
    # refused on names and shapes before any value is read: no weight
    # init, fp16 files (half the bytes)
    with skip_weight_init():
        small = SwinTransformer(arch='small').half()
    path = _save_official(tmp_path, small, 'swin_s.pth')
    with pytest.raises(ValueError) as err:
        SwinTransformer(
            arch='tiny',
            init_cfg=dict(type='Pretrained', checkpoint=path)).init_weights()
    assert 'swin_s.pth' in str(err.value)
    assert 'layers.2.blocks.6' in str(err.value)  # blocks Swin-T lacks

    with skip_weight_init():
        base = SwinTransformer(arch='base').half()
    path = _save_official(tmp_path, base, 'swin_b.pth')
    with pytest.raises(ValueError, match=r'patch_embed.proj.weight: '
                       r'checkpoint \(128, 3, 4, 4\) vs model \(96, 3, 4, 4\)'):
        SwinTransformer(
            arch='tiny',
            init_cfg=dict(type='Pretrained', checkpoint=path)).init_weights()


def test_wrong_input_channels_are_refused(swin_t):
    with pytest.raises(ValueError, match=r'\(N, 3, H, W\).*\(1, 1, 64, 64\)'):
        swin_t(torch.randn(1, 1, 64, 64))


def test_bad_arch_and_config_fields():
    with pytest.raises(ValueError, match="unknown arch 'huge'"):
        SwinTransformer(arch='huge')
    with pytest.raises(ValueError, match='out_indices'):
        SwinTransformer(out_indices=(4, ))
    with pytest.raises(ValueError, match='num_heads'):
        SwinTransformer(depths=(2, 2), num_heads=(3, 6, 12))


def test_presets():
    for arch, dims, depth in (('small', 96, 18), ('base', 128, 18),
                              ('large', 192, 18)):
        model = SwinTransformer(arch=arch)
        assert model.embed_dims == dims and model.depths[2] == depth
        assert model.out_channels == [dims * 2**i for i in range(4)]
    model = SwinTransformer(arch='tiny', embed_dims=64, depths=(1, 1, 1, 1),
                            num_heads=(2, 4, 8, 16))
    assert model.out_channels == [64, 128, 256, 512]


def test_frozen_stages_and_train_returns_self():
    model = SwinTransformer(frozen_stages=2)
    assert model.train() is model
    assert not any(p.requires_grad for p in model.patch_embed.parameters())
    assert not any(p.requires_grad for p in model.layers[1].parameters())
    assert not model.norm1.weight.requires_grad
    assert all(p.requires_grad for p in model.layers[2].parameters())
    assert not model.layers[0].training and model.layers[2].training


def test_gradient_checkpointing_matches(swin_t):
    plain = copy.deepcopy(swin_t).train()
    ckpt = copy.deepcopy(swin_t).train()
    for block in ckpt.modules():
        if hasattr(block, 'with_cp'):
            block.with_cp = True
    x = torch.randn(1, 3, 64, 64)
    sum(o.sum() for o in plain(x)).backward()
    sum(o.sum() for o in ckpt(x)).backward()
    for (name, a), b in zip(plain.named_parameters(), ckpt.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)


def test_classifier_params_and_flops():
    """Swin-T with a 1000-class head: 28.3M params, 4.5G FLOPs at 224 (paper).

    Counted with mmengine's FlopAnalyzer; its default handles skip the fused
    attention kernel, so mmvisattn.analysis.complexity adds one for it.
    """
    from mmpretrain.models import ImageClassifier

    from mmvisattn.analysis.complexity import get_complexity
    model = ImageClassifier(
        backbone=dict(type='mmvisattn.SwinTransformer', arch='tiny',
                      out_indices=(3, )),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', num_classes=1000, in_channels=768))
    result = get_complexity(model, (3, 224, 224))
    assert abs(result['params'] / 1e6 - 28.3) <= 0.3, result
    assert abs(result['flops'] / 1e9 - 4.5) <= 0.2, result


@pytest.mark.parametrize('name', ['SwinTransformer', 'TNT',
                                  'RSWAttTransformer'])
def test_same_mistake_same_error_in_every_backbone(name):
    """An unknown arch, a custom arch dict with a stray key, and an output
    stage that does not exist: one ValueError wording for all backbones."""
    from mmvisattn.models import backbones
    cls = getattr(backbones, name)
    with pytest.raises(ValueError, match=rf"^{name}: unknown arch 'huge'; "
                       r'choose from \['):
        cls(arch='huge')
    with pytest.raises(ValueError, match=rf'^{name}: a custom arch is a '
                       'dict with keys'):
        cls(arch=dict(cls.arch_zoo[sorted(cls.arch_zoo)[0]], typo=1))
    if name != 'TNT':  # TNT's out_indices name pyramid levels (own check)
        with pytest.raises(ValueError,
                           match=rf'^{name}: out_indices \[7\] out of range'):
            cls(out_indices=(0, 7))


@pytest.mark.parametrize('name', ['SwinTransformer', 'TNT',
                                  'RSWAttTransformer'])
def test_one_skeleton_freezes_and_evaluates_alike(name):
    """The shared base (models/backbones/base.py): frozen_stages freezes
    the embedding and the first stages and keeps them in eval mode, and
    norm_eval keeps BatchNorm layers in eval mode, in every backbone."""
    from mmvisattn.models import backbones
    from mmvisattn.models.backbones.base import BackboneBase
    cls = getattr(backbones, name)
    small = dict(SwinTransformer=dict(depths=(1, 1), num_heads=(3, 6),
                                      out_indices=(0, 1)),
                 TNT=dict(arch=dict(outer_dims=48, inner_dims=8,
                                    outer_heads=2, inner_heads=2, depth=2)),
                 RSWAttTransformer=dict(arch='nano', scale_windows=(3, )))
    model = cls(frozen_stages=1, norm_eval=True, **small[name])
    assert isinstance(model, BackboneBase)
    model.add_module('extra_bn', torch.nn.BatchNorm2d(4))
    model.train()
    modules, params = model.frozen_parts()
    assert modules and all(not m.training for m in modules)
    frozen = {id(p) for m in modules for p in m.parameters()}
    frozen |= {id(p) for p in params}
    for p in model.parameters():
        assert p.requires_grad == (id(p) not in frozen)
    assert not model.extra_bn.training
    assert any(m.training for m in model.modules() if m is not model)



def test_rectangular_windows_per_stage_and_where_refused():
    """(h, w) windows: one for every stage (window_size) or one per stage
    (window_sizes, or mmpretrain's spelling window_size=[...]), each table
    (2h-1)(2w-1) rows; the square-only kinds and semantics name the
    problem."""
    arch = dict(embed_dims=16, depths=(2, 2, 2), num_heads=(1, 2, 4))
    model = SwinTransformer(arch=arch, window_sizes=[(2, 4), 3, (3, 2)],
                            out_indices=(0, 1, 2))
    mmpretrain_spelling = SwinTransformer(
        arch=arch, window_size=[(2, 4), 3, (3, 2)], out_indices=(0, 1, 2))
    assert mmpretrain_spelling.window_size == model.window_size == (
        (2, 4), 3, (3, 2))
    shifts = [stage.blocks[1].shift_size for stage in model.layers]
    assert shifts == [(1, 2), 1, (1, 1)]
    assert model.layers[0].blocks[0].attn.relative_position_bias_table \
        .shape == (3 * 7, 1)
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 36, 52))
    assert [o.shape[-2:] for o in outs] == [(9, 13), (5, 7), (3, 4)]
    assert all(torch.isfinite(o).all() for o in outs)
    for kind in ('SlidingWindowAttention', 'HaloSlidingWindowAttention'):
        with pytest.raises(ValueError, match='square'):
            SwinTransformer(arch=arch, window_size=(2, 4),
                            attn_cfg=dict(type=kind))
    with pytest.raises(ValueError, match='pad_small_map=False'):
        SwinTransformer(arch=arch, window_size=(2, 4), pad_small_map=False)
    with pytest.raises(ValueError, match=r'window_size=\(2, 4, 6, 8\)'):
        SwinTransformer(arch=arch, window_size=(2, 4, 6, 8))
    with pytest.raises(ValueError, match='positive int'):
        SwinTransformer(arch=arch, window_size=(0, 4))
    with pytest.raises(ValueError, match='not both'):
        SwinTransformer(arch=arch, window_size=3, window_sizes=(3, 3, 3))
