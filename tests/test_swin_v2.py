"""Swin Transformer V2 against the outside references, on the same
weights, fp32: timm's ``SwinTransformerV2`` and mmpretrain's, through their
own classes and state dicts.

Stage outputs are compared before the output norms that only a dense
backbone has: ours are left at LayerNorm's identity affine and the
reference's raw stage output is normalised the same way; the last stage
goes through the reference's own final ``norm``.
"""
import inspect

import pytest
import torch
import torch.nn.functional as F

import mmvisattn  # noqa: F401
from helpers import randomise
from mmvisattn.models.backbones import SwinTransformerV2
from mmvisattn.models.utils.swin_convert import swin_to_official

timm = pytest.importorskip('timm')
ATOL = 1e-5


def _timm(name, **kwargs):
    torch.manual_seed(0)
    return randomise(timm.create_model(name, num_classes=0, **kwargs)).eval()


def _ours_from(state_dict, arch, **kwargs):
    """Ours with ``state_dict`` (any layout) loaded, output norms of the
    first stages at the identity affine; with the classifiers' window
    semantics (``pad_small_map=False``: a map of one window is not
    shifted), as timm's."""
    model = SwinTransformerV2(arch, out_indices=(0, 1, 2, 3),
                              pad_small_map=False, **kwargs)
    result = model.load_state_dict(state_dict, strict=False)
    assert not result.unexpected_keys
    assert sorted(result.missing_keys) == [
        f'norm{i}.{p}' for i in range(3) for p in ('bias', 'weight')]
    return model.eval()


def _timm_stages(model, x):
    """Every stage's output as a dense backbone gives it (see the doc)."""
    stages = model.forward_intermediates(x, intermediates_only=True)
    out = [F.layer_norm(s.permute(0, 2, 3, 1), s.shape[1:2]) for s in
           stages[:-1]]
    out.append(model.norm(stages[-1].permute(0, 2, 3, 1)))
    return [o.permute(0, 3, 1, 2) for o in out]


def _assert_stages_equal(ours, ref, x):
    with torch.no_grad():
        got, want = ours(x), _timm_stages(ref, x)
    assert len(got) == len(want) == 4
    for a, b in zip(got, want):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=ATOL)


def _image(*size):
    return torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(1))


def test_equals_timm_swinv2_tiny_window8_256():
    ref = _timm('swinv2_tiny_window8_256')
    ours = _ours_from(ref.state_dict(), 'tiny')
    _assert_stages_equal(ours, ref, _image(256, 256))


@pytest.mark.slow
@pytest.mark.parametrize('name,arch,window,size', [
    # stage 4 of a 256 image is 8x8: timm shrinks the window to the map,
    # mmpretrain's configs name it per stage
    ('swinv2_small_window16_256', 'small', (16, 16, 16, 8), (256, 256)),
    # a non-square size timm builds its model for
    ('swinv2_tiny_window8_256', 'tiny', 8, (512, 768)),
])
def test_equals_timm_at_other_windows_and_sizes(name, arch, window, size):
    ref = _timm(name, img_size=size)
    ours = _ours_from(ref.state_dict(), arch, window_size=window)
    _assert_stages_equal(ours, ref, _image(*size))


def test_window_transfer_needs_nothing_resized_and_equals_timm():
    """A window-8 checkpoint at window 16: the continuous bias evaluates
    the same MLP at the new offsets (``pretrained_window_sizes=8``), as
    timm's model built for it does; the file loads strictly."""
    state = _timm('swinv2_tiny_window8_256').state_dict()
    ref = timm.create_model('swinv2_tiny_window16_256', num_classes=0,
                            img_size=512, pretrained_window_sizes=(8, ) * 4)
    ref.load_state_dict(state)
    ours = _ours_from(state, 'tiny', window_size=16,
                      pretrained_window_sizes=8, img_size=512)
    _assert_stages_equal(ours, ref.eval(), _image(512, 512))


def test_window8_file_at_rectangular_windows_equals_timm():
    """A window-8 checkpoint at (8, 12) windows: the continuous bias takes
    rectangular offsets, as timm's model built for them does
    (``always_partition=True``: every map shifted, our ``pad_small_map``'s
    detection semantics), at 256 x 384 where every map is whole windows."""
    from timm.models.swin_transformer_v2 import SwinTransformerV2 as TimmV2
    if 'always_partition' not in inspect.signature(TimmV2).parameters:
        pytest.skip(f'timm {timm.__version__} lacks always_partition')
    state = _timm('swinv2_tiny_window8_256').state_dict()
    ref = timm.create_model('swinv2_tiny_window8_256', num_classes=0,
                            img_size=(256, 384), window_size=(8, 12),
                            pretrained_window_sizes=(8, ) * 4,
                            always_partition=True)
    ref.load_state_dict(state)
    ours = SwinTransformerV2('tiny', out_indices=(0, 1, 2, 3),
                             window_size=(8, 12), pretrained_window_sizes=8,
                             pad_small_map=True)
    result = ours.load_state_dict(state, strict=False)
    assert not result.unexpected_keys
    _assert_stages_equal(ours.eval(), ref.eval(), _image(256, 384))


def test_window8_file_loads_into_a_detection_backbone(tmp_path):
    """A window-8 / 256 classifier file into the window-16 backbone of a
    detector (mmdet's convention: every stage out, any size padded), the
    window the configs/swin_v2 detectors use: every weight but the new
    output norms comes from the file, nothing resized, and a training-size
    image runs."""
    arch = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])
    source = randomise(SwinTransformerV2(arch, out_indices=(3, )))
    path = str(tmp_path / 'swinv2_window8_256.pth')
    torch.save({'model': dict(swin_to_official(source.state_dict()))}, path)
    detector = SwinTransformerV2(
        arch, window_size=16, pretrained_window_sizes=8,
        init_cfg=dict(type='Pretrained', checkpoint=path))
    detector.init_weights()
    loaded = detector.state_dict()
    for key, value in source.state_dict().items():
        torch.testing.assert_close(loaded[key], value, rtol=0, atol=0,
                                   msg=key)
    with torch.no_grad():
        outs = detector.eval()(_image(200, 304))
    assert [tuple(o.shape[1:]) for o in outs] == [
        (32, 50, 76), (64, 25, 38), (128, 13, 19), (256, 7, 10)]
    assert all(torch.isfinite(o).all() for o in outs)


def test_official_layout_loads_and_timm_reads_the_same_file(tmp_path):
    """A file named as the authors' code names its keys (merging at the
    end of a stage, ``norm``, ``head``, the derived buffers stored): ours
    loads it, and timm's own ``checkpoint_filter_fn`` converts the same
    file for timm, the second witness."""
    from timm.models.swin_transformer_v2 import checkpoint_filter_fn
    mine = randomise(SwinTransformerV2('tiny', out_indices=(3, )))
    official = dict(swin_to_official(mine.state_dict()))
    for name, module in mine.named_modules():
        if hasattr(module, 'relative_coords_table'):
            official[f'{name}.relative_coords_table'] = \
                module.relative_coords_table[None].view(1, 15, 15, 2)
            official[f'{name}.relative_position_index'] = \
                module.relative_position_index
    official['head.weight'] = torch.zeros(1000, 768)
    official['head.bias'] = torch.zeros(1000)
    ref = timm.create_model('swinv2_tiny_window8_256', num_classes=1000)
    ref.load_state_dict(checkpoint_filter_fn({'model': official}, ref))
    ref.reset_classifier(0)
    path = str(tmp_path / 'swinv2_tiny_patch4_window8_256.pth')
    torch.save({'model': official}, path)
    ours = SwinTransformerV2('tiny', out_indices=(0, 1, 2, 3),
                             pad_small_map=False, init_cfg=dict(
                                 type='Pretrained', checkpoint=path))
    ours.init_weights()  # strict: only the new output norms may be missing
    for i in range(3):  # no counterpart in the file: compared at identity
        getattr(ours, f'norm{i}').reset_parameters()
    _assert_stages_equal(ours.eval(), ref.eval(), _image(256, 256))


@pytest.mark.slow
def test_detection_size_first_stage_equals_timm():
    """At 800x1216, a size a detector trains at, the maps of stages 1-3
    (100x152, 50x76, 25x38) are not multiples of window 8 and ours pads as
    V1 does: pad, then shift, with the mask over the padded map (the
    authors' detection code, mmdet's Swin, Hugging Face's Swin V2). timm
    shifts first and pads after, so the two models differ from stage 1 on
    by design; stage 0 (200x304) needs no padding, and there the two are
    compared exactly. The padded stages are compared with Hugging Face's
    ``Swinv2Model``, which pads as ours (tests/test_hf_layout.py)."""
    size = (800, 1216)
    ref = _timm('swinv2_tiny_window8_256', img_size=size)
    ours = SwinTransformerV2('tiny', out_indices=(0, ))
    result = ours.load_state_dict(ref.state_dict(), strict=False)
    assert result.missing_keys == ['norm0.weight', 'norm0.bias']
    assert result.unexpected_keys == ['norm3.weight', 'norm3.bias']
    x = _image(*size)
    with torch.no_grad():
        got = ours.eval()(x)[0]
        want = ref.forward_intermediates(x, indices=[0],
                                         intermediates_only=True)[0]
    want = F.layer_norm(want.permute(0, 2, 3, 1), want.shape[1:2])
    torch.testing.assert_close(got, want.permute(0, 3, 1, 2), rtol=0,
                               atol=ATOL)


@pytest.mark.parametrize('arch,name', [
    ('tiny', 'swinv2_tiny_window8_256'),
    ('small', 'swinv2_small_window8_256'),
    ('base', 'swinv2_base_window8_256'),
])
def test_parameter_counts_equal_timm_without_its_head(arch, name):
    ours = SwinTransformerV2(arch, out_indices=(3, ))
    with torch.device('meta'):
        ref = timm.create_model(name, num_classes=0)
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in ref.parameters())
    if arch == 'tiny':
        assert round(count / 1e6, 2) == 27.58


# ---------------------------------------------------------------- mmpretrain
def _peer(**kwargs):
    from mmpretrain.models.backbones import SwinTransformerV2 as Peer
    torch.manual_seed(0)
    return Peer(**kwargs)


def test_equals_mmpretrain_with_its_weights():
    peer = randomise(_peer(arch='tiny', out_indices=(0, 1, 2, 3)))
    peer.eval()
    ours = SwinTransformerV2('tiny', out_indices=(0, 1, 2, 3),
                             convention='mmpretrain')
    ours.load_state_dict(peer.state_dict())
    x = _image(256, 256)
    with torch.no_grad():
        for a, b in zip(ours.eval()(x), peer(x)):
            torch.testing.assert_close(a, b, rtol=0, atol=ATOL)


@pytest.mark.parametrize('frozen_stages', [-1, 0, 1, 2, 3])
def test_frozen_stages_freeze_what_mmpretrain_freezes(frozen_stages):
    """Built for mmpretrain, ``frozen_stages=k`` freezes what mmpretrain's
    V2 does (whose stages open with their merging) after ``train()``: per
    parameter, ``requires_grad`` and its module's ``training``, carried
    into our layout by loading them as a 0/1 state dict."""
    kwargs = dict(arch='tiny', out_indices=(0, 1, 2, 3),
                  frozen_stages=frozen_stages)
    peer = _peer(**kwargs)
    peer.train()
    ours = SwinTransformerV2(convention='mmpretrain', **kwargs).train()

    def owner(model, key):
        return model.get_submodule(key.rpartition('.')[0])

    for flag in ('requires_grad', 'training'):
        value = (lambda m, k, p: p.requires_grad) if flag == 'requires_grad' \
            else (lambda m, k, p: owner(m, k).training)
        flags = {k: torch.full_like(p, float(value(peer, k, p)))
                 for k, p in peer.named_parameters()}
        probe = SwinTransformerV2(convention='mmpretrain', **kwargs)
        probe.load_state_dict(flags)
        for (key, p), (_, want) in zip(ours.named_parameters(),
                                       probe.named_parameters()):
            assert value(ours, key, p) == bool(want.flatten()[0]), (flag,
                                                                    key)


def test_defaults_follow_the_convention():
    """mmpretrain's defaults for a model built for it (the last stage out,
    classifier windows), mmdet's elsewhere (every stage, any size)."""
    assert SwinTransformerV2(convention='mmpretrain').out_indices == (3, )
    ours = SwinTransformerV2()
    assert ours.out_indices == (0, 1, 2, 3)
    with torch.no_grad():  # a detection size, not a window multiple
        outs = ours.eval()(_image(100, 76))
    assert [tuple(o.shape[2:]) for o in outs] == [(25, 19), (13, 10),
                                                  (7, 5), (4, 3)]


def test_bad_values_are_refused_by_name():
    with pytest.raises(ValueError, match='pretrained_window_sizes'):
        SwinTransformerV2(pretrained_window_sizes=(8, 8))
    with pytest.raises(ValueError, match='window_size'):
        SwinTransformerV2(window_size=(8, 8, 8))
    with pytest.raises(ValueError, match='qk_scale'):
        SwinTransformerV2(qk_scale=0.1)
