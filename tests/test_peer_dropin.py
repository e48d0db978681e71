"""Drop-in means the peer's behaviour. mmdet's, mmseg's and mmpretrain's
Swin and mmpretrain's TNT are built from the same keywords as ours (ours
through the peer's registry with only ``type`` changed, where the peer has
one) and compared through public means only: outputs with the peer's
weights, ``requires_grad`` and ``training`` per parameter after ``train()``,
initialisation statistics per parameter group, loading the checkpoints the
peer's own model wrote, and the errors for what the peer refuses."""
import copy
import inspect
import logging
import re
from typing import Callable, NamedTuple

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.registry import DefaultScope
from mmengine.runner import load_checkpoint, save_checkpoint

import mmvisattn  # noqa: F401
from helpers import randomise
from mmvisattn.models.backbones import TNT, SwinTransformer


class Peer(NamedTuple):
    name: str
    peer_cls: Callable
    ours_cls: type
    scope: str  # the default scope the peer's configs build in
    small: dict  # keywords of a small model, the peer's spelling
    frozen_stages: range  # what the peer's frozen_stages accepts


def _mmdet_swin():
    from mmdet.models.backbones import SwinTransformer as Peer_
    return Peer_


def _mmseg_swin():
    from mmseg.models.backbones import SwinTransformer as Peer_
    return Peer_


def _mmpretrain_swin():
    from mmpretrain.models.backbones import SwinTransformer as Peer_
    return Peer_


def _mmpretrain_tnt():
    from mmpretrain.models.backbones import TNT as Peer_
    return Peer_


DET_SWIN = dict(embed_dims=32, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8),
                window_size=4, use_abs_pos_embed=True, pretrain_img_size=64)
PEERS = [
    Peer('mmdet-swin', _mmdet_swin, SwinTransformer, 'mmdet', DET_SWIN,
         range(-1, 5)),
    Peer('mmseg-swin', _mmseg_swin, SwinTransformer, 'mmseg', DET_SWIN,
         range(-1, 5)),
    Peer('mmpretrain-swin', _mmpretrain_swin, SwinTransformer, 'mmpretrain',
         dict(arch=dict(embed_dims=32, depths=[2, 2, 2, 2],
                        num_heads=[1, 2, 4, 8]),
              img_size=128, window_size=4, use_abs_pos_embed=True,
              out_indices=(0, 1, 2, 3)), range(-1, 4)),
    Peer('mmpretrain-tnt', _mmpretrain_tnt, TNT, 'mmpretrain',
         dict(arch=dict(embed_dims_outer=64, embed_dims_inner=8,
                        num_layers=3, num_heads_outer=4, num_heads_inner=2),
              img_size=64), range(-1, 0)),
]
IDS = [p.name for p in PEERS]


def _peer_class(peer):
    pytest.importorskip(peer.scope)
    return peer.peer_cls()


def build_peer(peer, **kwargs):
    return _peer_class(peer)(**{**peer.small, **kwargs})


def build_ours(peer, **kwargs):
    """Ours as the peer's configs build it: the same keywords, only
    ``type`` changed, in the peer's default scope."""
    from mmengine.registry import MODELS
    cfg = dict(type=f'mmvisattn.{peer.ours_cls.__name__}',
               **{**peer.small, **kwargs})
    with DefaultScope.overwrite_default_scope(peer.scope):
        model = MODELS.build(cfg)
    assert type(model) is peer.ours_cls
    return model


def _eval(model):
    model.eval()  # mmdet's and mmseg's train() return None
    return model


def _input(peer, size=None):
    size = size or (peer.small.get('img_size') or 64)
    return torch.randn(2, 3, size, size,
                       generator=torch.Generator().manual_seed(1))


def _assert_same_outputs(theirs, mine, atol=1e-5):
    assert isinstance(mine, tuple)
    assert len(theirs) == len(mine)
    for a, b in zip(theirs, mine):
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, atol=atol, rtol=1e-4)


@pytest.mark.parametrize('peer', PEERS, ids=IDS)
def test_outputs_equal_with_the_peers_weights(peer):
    theirs = _eval(randomise(build_peer(peer)))
    ours = build_ours(peer).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x = _input(peer)
    with torch.no_grad():
        _assert_same_outputs(theirs(x), ours(x))


# one keyword at a time away from the peer's default (and the small
# models' keywords), with the input it needs: (peer, keywords, input size,
# input channels)
DET_KEYWORDS = [
    dict(window_size=2), dict(mlp_ratio=2), dict(out_indices=(1, 3)),
    dict(qkv_bias=False), dict(qk_scale=0.5), dict(patch_norm=False),
    dict(use_abs_pos_embed=False), dict(act_cfg=dict(type='ReLU')),
    dict(with_cp=True), dict(drop_rate=0.1, attn_drop_rate=0.1,
                             drop_path_rate=0.3),
    dict(in_channels=4), dict(patch_size=2, strides=(2, 2, 2, 2)),
    dict(pretrain_img_size=(64, 96), size=(64, 96)),
]
PRETRAIN_KEYWORDS = [
    dict(window_size=2), dict(out_indices=(1, 3)),
    dict(out_after_downsample=True, out_indices=(0, 1, 2)),
    dict(use_abs_pos_embed=False), dict(interpolate_mode='bilinear'),
    dict(with_cp=True), dict(norm_eval=True), dict(pad_small_map=True),
    dict(in_channels=4), dict(patch_size=8, size=256),
    dict(drop_rate=0.1, drop_path_rate=0.3),
]
TNT_KEYWORDS = [
    dict(ffn_ratio=2), dict(qkv_bias=True), dict(patch_size=8, img_size=32),
    dict(in_channels=4), dict(first_stride=2),
    dict(drop_rate=0.1, drop_path_rate=0.3),
]
# (``size``: the input's, where the keyword needs another)
KEYWORD_CASES = [(PEERS[0], kw) for kw in DET_KEYWORDS] + [
    (PEERS[1], kw) for kw in DET_KEYWORDS] + [
    (PEERS[2], kw) for kw in PRETRAIN_KEYWORDS] + [
    (PEERS[3], kw) for kw in TNT_KEYWORDS]


@pytest.mark.parametrize(
    'peer,kwargs', KEYWORD_CASES,
    ids=[f'{p.name}-{"-".join(k)}' for p, k in KEYWORD_CASES])
def test_each_keyword_means_what_it_means_there(peer, kwargs):
    """One keyword away from the default: the same parameters (the peer's
    state dict loads strictly) and the same outputs in eval mode, at the
    input the keyword asks for; ``interpolate_mode`` at another size than
    the pretraining one, where it resizes."""
    kwargs = dict(kwargs)
    size = kwargs.pop('size', None) or kwargs.get('img_size') or \
        peer.small.get('img_size') or 64
    if 'interpolate_mode' in kwargs:
        size = 192  # another grid than img_size's: the embedding resized
    theirs = _eval(randomise(build_peer(peer, **kwargs)))
    ours = build_ours(peer, **kwargs).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    h, w = (size, size) if isinstance(size, int) else size
    x = torch.randn(2, kwargs.get('in_channels', 3), h, w,
                    generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _assert_same_outputs(theirs(x), ours(x))


def _flags_in_our_layout(peer, theirs, flag):
    """``flag(parameter, owner module)`` of every peer parameter, carried
    into our layout by loading the peer's state dict with each parameter
    replaced by 0/1 (the load converts names and layouts, not values)."""
    owners = {f'{m_name}.{p_name}'.lstrip('.'): (p, m)
              for m_name, m in theirs.named_modules()
              for p_name, p in m.named_parameters(recurse=False)}
    state = theirs.state_dict()
    for name, (p, module) in owners.items():
        state[name] = torch.full_like(p, float(flag(p, module)))
    carrier = build_ours(peer)
    carrier.load_state_dict(state, strict=True)
    flags = {}
    for name, p in carrier.named_parameters():
        assert p.min() == p.max(), f'{name}: mixed flags'
        flags[name] = bool(p.max() > 0.5)
    return flags


def _frozen_cases():
    return [pytest.param(peer, k, id=f'{peer.name}-frozen{k}')
            for peer in PEERS for k in peer.frozen_stages]


@pytest.mark.parametrize('peer,k', _frozen_cases())
def test_frozen_parameters_and_eval_modules_after_train(peer, k):
    kwargs = dict(frozen_stages=k) if k >= 0 else {}
    theirs = build_peer(peer, **kwargs)
    theirs.train()
    ours = build_ours(peer, **kwargs)
    assert ours.train() is ours
    owner = {f'{m_name}.{p_name}'.lstrip('.'): m
             for m_name, m in ours.named_modules()
             for p_name, _ in m.named_parameters(recurse=False)}
    grad = _flags_in_our_layout(peer, theirs, lambda p, m: p.requires_grad)
    training = _flags_in_our_layout(peer, theirs, lambda p, m: m.training)
    for name, p in ours.named_parameters():
        assert p.requires_grad == grad[name], name
        assert owner[name].training == training[name], name
    frozen = sum(p.numel() for p in ours.parameters() if not p.requires_grad)
    assert frozen == sum(p.numel() for p in theirs.parameters()
                         if not p.requires_grad)


def _groups(named):
    """Parameters grouped by name with block and stage numbers as ``*``."""
    groups = {}
    for name, value in named:
        groups.setdefault(re.sub(r'\.\d+\.', '.*.', name), []).append(
            value.detach().flatten())
    return {k: torch.cat(v) for k, v in groups.items()}


INIT_CASES = [
    pytest.param(PEERS[0], {}, id='mmdet-swin'),
    pytest.param(PEERS[1], {}, id='mmseg-swin'),
    pytest.param(PEERS[2], {}, id='mmpretrain-swin'),
    pytest.param(PEERS[2], dict(init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.)]),
        id='mmpretrain-swin-init_cfg-list'),
    pytest.param(PEERS[3], {}, id='mmpretrain-tnt'),
]
BIG = dict(embed_dims=96, num_heads=(3, 6, 12, 24))


@pytest.mark.parametrize('peer,kwargs', INIT_CASES)
def test_initialisation_statistics_per_parameter_group(peer, kwargs):
    """The same distribution per group: mean and std within 10% (of the peer's
    std for the mean) plus the sampling error of the group's size,
    constants equal, zero where the peer has zero. Wider layers than the
    other tests: 96 channels at least, so a group's statistics are not
    noise."""
    if peer.ours_cls is SwinTransformer:
        arch = 'arch' in peer.small
        big = dict(arch=dict(BIG, depths=(2, 2, 2, 2))) if arch else BIG
        kwargs = dict(big, **kwargs)
    else:
        kwargs = dict(arch=dict(embed_dims_outer=192, embed_dims_inner=24,
                                num_layers=3, num_heads_outer=4,
                                num_heads_inner=2), **kwargs)
    torch.manual_seed(0)
    theirs = build_peer(peer, **kwargs)
    theirs.init_weights()
    torch.manual_seed(1)
    ours = build_ours(peer, **kwargs)
    ours.init_weights()
    carrier = build_ours(peer, **kwargs)
    carrier.load_state_dict(theirs.state_dict(), strict=True)
    expected = _groups(carrier.named_parameters())
    got = _groups(ours.named_parameters())
    assert expected.keys() == got.keys()
    for group, want in expected.items():
        have = got[group]
        if not want.any():
            assert not have.any(), f'{group}: the peer starts at zero'
        elif want.std() < 1e-6:
            torch.testing.assert_close(have, want, msg=group)
        else:
            # 10%, widened by the sampling error of two draws of n values
            # (3 standard errors): a 96-value bias is not 10% exact
            n = want.numel()
            assert abs(have.std() / want.std() - 1) <= 0.1 + 3 / n**.5, (
                group, have.std(), want.std())
            assert abs(have.mean() - want.mean()) <= want.std() * (
                0.1 + 3 * (2 / n)**.5), (group, have.mean(), want.mean())


class _Whole(torch.nn.Module):
    """A whole model around a backbone: what a detector, segmentor or
    classifier checkpoint holds (``backbone.*`` keys)."""

    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone


@pytest.mark.parametrize('peer', PEERS, ids=IDS)
def test_loads_the_checkpoints_the_peer_wrote(peer, tmp_path):
    theirs = _eval(randomise(build_peer(peer)))
    path = str(tmp_path / 'peer.pth')
    save_checkpoint(_Whole(theirs).state_dict(), path)
    x = _input(peer)
    with torch.no_grad():
        want = theirs(x)
    # through init_cfg, through mmengine's load_checkpoint (load_from), and
    # the peer's state dict through load_state_dict
    by_init = build_ours(peer, init_cfg=dict(type='Pretrained',
                                             checkpoint=path))
    by_init.init_weights()
    whole = _Whole(build_ours(peer))
    load_checkpoint(whole, path, strict=True)
    by_state = build_ours(peer)
    by_state.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        for ours in (by_init.eval(), whole.backbone.eval(), by_state.eval()):
            _assert_same_outputs(want, ours(x))


def test_absolute_embedding_resized_as_mmpretrain_resizes_it(tmp_path):
    """A checkpoint of a smaller image size loads at a larger one, its
    absolute embedding resized as mmpretrain's own load resizes it."""
    peer = PEERS[2]
    # one window: mmpretrain's own resize of the relative tables needs
    # SciPy's interp2d, which SciPy 1.14 removed
    small = randomise(build_peer(peer, img_size=64, window_size=3))
    big_theirs = _eval(build_peer(peer, img_size=96, window_size=3))
    big_theirs.load_state_dict(small.state_dict())
    ours = build_ours(peer, img_size=96, window_size=3).eval()
    ours.load_state_dict(small.state_dict())
    path = str(tmp_path / 'small.pth')
    save_checkpoint(_Whole(small).state_dict(), path)
    by_init = build_ours(peer, img_size=96, window_size=3,
                         init_cfg=dict(type='Pretrained', checkpoint=path))
    by_init.init_weights()
    x = _input(peer, 96)
    with torch.no_grad():
        want = big_theirs(x)
        _assert_same_outputs(want, ours(x))
        _assert_same_outputs(want, by_init.eval()(x))


@pytest.mark.parametrize('peer', PEERS[:2], ids=IDS[:2])
def test_relative_tables_resized_as_mmdet_and_mmseg_resize_them(
        peer, tmp_path):
    """A window-4 checkpoint at window 6: the peer resizes the tables
    bicubically when it loads its ``Pretrained`` file; ours equals it. The
    file leaves out the peer's ``relative_position_index`` buffers, as the
    official releases' tables come: the peer's loader cannot load its own
    window-4 index into a window-6 model."""
    small = randomise(build_peer(peer, use_abs_pos_embed=False))
    path = str(tmp_path / 'w4.pth')
    save_checkpoint({k: v for k, v in _Whole(small).state_dict().items()
                     if not k.endswith('relative_position_index')}, path)
    # init_cfg, not pretrained=: mmdet 3.3.0's Swin sets init_cfg from
    # pretrained before its base class resets it, so it never loads that
    # (a ConfigDict, as configs give it: mmdet reads init_cfg.checkpoint)
    init_cfg = ConfigDict(type='Pretrained', checkpoint=path)
    theirs = build_peer(peer, use_abs_pos_embed=False, window_size=6,
                        init_cfg=init_cfg)
    theirs.init_weights()
    ours = build_ours(peer, use_abs_pos_embed=False, window_size=6,
                      init_cfg=init_cfg)
    ours.init_weights()
    x = _input(peer)
    with torch.no_grad():
        _assert_same_outputs(_eval(theirs)(x), ours.eval()(x))


ERRORS = [
    # (peer, keywords the peer refuses, the field our error names)
    (PEERS[0], dict(pretrain_img_size=(64, 64, 64)), 'pretrain_img_size'),
    (PEERS[0], dict(out_indices=(4, )), 'out_indices'),
    (PEERS[0], dict(frozen_stages=5), 'frozen_stages'),
    (PEERS[0], dict(pretrained=3), 'pretrained'),
    (PEERS[0], dict(pretrained='a.pth', init_cfg=dict(
        type='Pretrained', checkpoint='b.pth')), 'init_cfg'),
    (PEERS[1], dict(pretrain_img_size=(64, 64, 64)), 'pretrain_img_size'),
    (PEERS[1], dict(out_indices=(4, )), 'out_indices'),
    (PEERS[1], dict(frozen_stages=5), 'frozen_stages'),
    (PEERS[2], dict(arch='huge'), 'arch'),
    (PEERS[2], dict(arch=dict(embed_dims=32, num_heads=[1, 2, 4, 8])),
     'depths'),
    (PEERS[2], dict(frozen_stages=4), 'frozen_stages'),
    (PEERS[2], dict(out_indices=(4, )), 'out_indices'),
    (PEERS[3], dict(arch='huge'), 'arch'),
    (PEERS[3], dict(arch=dict(embed_dims_outer=64, num_layers=2)), 'arch'),
]
# what the peer takes and silently ignores: refused, the difference named
IGNORED = [(PEERS[3], dict(act_cfg=dict(type='ReLU')), 'act_cfg')]


@pytest.mark.parametrize('peer,kwargs,field', IGNORED,
                         ids=[p.name for p, _, _ in IGNORED])
def test_what_the_peer_ignores_is_refused_naming_it(peer, kwargs, field):
    x = _input(peer)
    with torch.no_grad():
        plain = randomise(build_peer(peer))
        other = randomise(build_peer(peer, **kwargs))
        torch.testing.assert_close(_eval(other)(x), _eval(plain)(x))
    with pytest.raises(ValueError, match=field):
        build_ours(peer, **kwargs)


@pytest.mark.parametrize(
    'peer,kwargs,field', ERRORS,
    ids=[f'{p.name}-{next(iter(k))}' for p, k, _ in ERRORS])
def test_what_the_peer_refuses_is_refused_naming_the_field(
        peer, kwargs, field):
    with pytest.raises(Exception):  # each peer its own kind
        build_peer(peer, **kwargs).train()
    with pytest.raises((ValueError, TypeError), match=field):
        build_ours(peer, **kwargs)


@pytest.mark.parametrize('peer', PEERS, ids=IDS)
def test_every_keyword_and_default_of_the_peer(peer):
    """Every keyword the peer's constructor documents is taken; built with
    none (the peer's defaults: full-size models), ours has the peer's
    parameter count and outputs."""
    peer_cls = _peer_class(peer)
    theirs_kw = set(inspect.signature(peer_cls.__init__).parameters)
    # ours: its signature's (and its base's, through **kwargs) and the
    # peers' keywords its table reads
    ours_kw = set(peer.ours_cls.peer_keywords)
    for cls in peer.ours_cls.__mro__:
        if '__init__' in vars(cls):
            ours_kw |= set(inspect.signature(cls.__init__).parameters)
        if 'kwargs' not in inspect.signature(cls.__init__).parameters:
            break
    assert theirs_kw - {'self'} <= ours_kw
    with torch.no_grad():
        theirs = _eval(peer_cls())
        from mmengine.registry import MODELS
        with DefaultScope.overwrite_default_scope(peer.scope):
            ours = MODELS.build(
                dict(type=f'mmvisattn.{peer.ours_cls.__name__}')).eval()
        assert sum(p.numel() for p in ours.parameters()) == sum(
            p.numel() for p in theirs.parameters())
        ours.load_state_dict(theirs.state_dict(), strict=True)
        x = _input(peer, 224)[:1]
        _assert_same_outputs(theirs(x), ours(x), atol=1e-4)


def test_whose_meaning_is_chosen_and_how_to_name_it():
    """mmpretrain's meaning where mmpretrain is the default scope (every
    mmpretrain config), mmdet's otherwise, an mmpretrain classifier built
    in plain Python too: what the user wrote decides, never who calls;
    ``convention`` names either."""
    pytest.importorskip('mmpretrain')
    from mmpretrain.models import ImageClassifier
    small = dict(depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8), embed_dims=32)
    assert SwinTransformer(**small).convention == 'mmdet'
    assert SwinTransformer(convention='mmpretrain',
                           **small).out_indices == (3, )
    with DefaultScope.overwrite_default_scope('mmdet'):
        assert SwinTransformer(**small).convention == 'mmdet'
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        assert SwinTransformer(**small).convention == 'mmpretrain'
        assert SwinTransformer(convention='mmdet',
                               **small).convention == 'mmdet'
        assert TNT().convention == 'mmpretrain'
    head = dict(type='mmpretrain.LinearClsHead', num_classes=3,
                in_channels=256)
    classifier = ImageClassifier(
        backbone=dict(type='mmvisattn.SwinTransformer', **small), head=head)
    assert classifier.backbone.convention == 'mmdet'
    classifier = ImageClassifier(
        backbone=dict(type='mmvisattn.SwinTransformer',
                      convention='mmpretrain', **small), head=head)
    assert classifier.backbone.convention == 'mmpretrain'
    assert classifier.backbone.out_indices == (3, )
    with pytest.raises(ValueError, match='convention'):
        SwinTransformer(convention='mmseg', **small)


def test_every_parameter_of_an_mmpretrain_classifier_gets_a_gradient():
    """With mmpretrain's default out_indices no output norm is left without
    a gradient (DDP with find_unused_parameters=False stops on one)."""
    pytest.importorskip('mmpretrain')
    from mmpretrain.models import ImageClassifier
    from mmpretrain.structures import DataSample
    classifier = ImageClassifier(
        backbone=dict(type='mmvisattn.SwinTransformer',
                      arch=dict(embed_dims=32, depths=[1, 1, 1, 1],
                                num_heads=[1, 2, 4, 8]),
                      img_size=64, window_size=2, convention='mmpretrain'),
        neck=dict(type='mmpretrain.GlobalAveragePooling'),
        head=dict(type='mmpretrain.LinearClsHead', num_classes=3,
                  in_channels=256))
    samples = [DataSample().set_gt_label(i) for i in (0, 2)]
    losses = classifier(torch.randn(2, 3, 64, 64), samples, mode='loss')
    sum(losses.values()).backward()
    unused = [n for n, p in classifier.named_parameters()
              if p.requires_grad and p.grad is None]
    assert not unused


def test_tnt_spellings_of_mmpretrain():
    """mmpretrain's TNT keywords: ffn_ratio, first_stride, num_fcs; two
    spellings that disagree, and what the MLP cannot be, are refused."""
    pytest.importorskip('mmpretrain')
    small = dict(arch=dict(embed_dims_outer=64, embed_dims_inner=8,
                           num_layers=1, num_heads_outer=4,
                           num_heads_inner=2), img_size=64)
    model = TNT(ffn_ratio=2, first_stride=2, num_fcs=2, **small)
    assert model.blocks[0].outer.mlp.fc1.out_features == 128
    assert model.words_per_side == 8
    with pytest.raises(ValueError, match='num_fcs'):
        TNT(num_fcs=3, **small)
    with pytest.raises(ValueError, match='ffn_ratio'):
        TNT(mlp_ratio=3, ffn_ratio=2, **small)
    kept = copy.deepcopy(small)
    TNT(**kept)
    assert kept == small  # the caller's arch dict is not changed


def _our_imagenet_configs():
    """Swin's, Swin V2's and TNT's ImageNet configs, found by name: reading
    every config at collection would cost each worker about a minute
    (mmengine parses every metafile of mmdet or mmseg for each ``mmdet::``
    base). The test asserts that each is an mmpretrain-scoped config."""
    import glob
    import os.path as osp

    from helpers import REPO
    paths = glob.glob(osp.join(REPO, 'configs', '**', '*.py'), recursive=True)
    return [pytest.param(path, id=osp.basename(path))
            for path in sorted(paths) if '_base_' not in path and re.match(
                r'(swin|swinv2|tnt)-.*_in(1|22)k', osp.basename(path))]


@pytest.mark.parametrize('path', _our_imagenet_configs())
def test_our_imagenet_configs_build_what_they_built(path):
    """This project's ImageNet configs build in mmpretrain's scope, so they
    get its meaning; they spell out what differs, so the model is the one
    mmdet's meaning builds."""
    from mmengine.config import Config
    from mmengine.registry import MODELS

    from helpers import skip_weight_init
    cfg = Config.fromfile(path)
    assert cfg.get('default_scope') == 'mmpretrain'
    backbone = cfg.model.backbone.to_dict()
    assert backbone['type'] in ('mmvisattn.SwinTransformer',
                                'mmvisattn.SwinTransformerV2', 'mmvisattn.TNT')
    backbone.pop('init_cfg', None)
    with skip_weight_init():
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            built = MODELS.build(copy.deepcopy(backbone))
        before = MODELS.build(dict(backbone, convention='mmdet'))
    assert built.convention == 'mmpretrain'
    assert {k: v.shape for k, v in built.state_dict().items()} == {
        k: v.shape for k, v in before.state_dict().items()}
    for name in ('out_indices', 'pad_small_map', 'legacy', 'out_type',
                 'frozen_stages'):
        assert getattr(built, name, None) == getattr(before, name, None)


def test_convert_weights_false_loads_an_mmdet_file_as_mmdet_does(tmp_path):
    """mmdet's ``convert_weights=False`` (GLIP's and Grounding DINO's
    configs: the file is a detector in mmdet's layout already): mmdet's
    class and ours, given the same file through ``init_cfg``, hold the
    file's weights and compute the same features."""
    peer = PEERS[0]
    small = dict(peer.small, use_abs_pos_embed=False)  # as GLIP's configs
    source = randomise(_peer_class(peer)(**small))
    path = str(tmp_path / 'mmdet_detector.pth')
    torch.save(dict(state_dict={f'backbone.{k}': v for k, v in
                                source.state_dict().items()}), path)
    # a ConfigDict, as a config gives it (mmdet reads init_cfg.checkpoint)
    init_cfg = ConfigDict(type='Pretrained', checkpoint=path)
    theirs = build_peer(peer, use_abs_pos_embed=False, convert_weights=False,
                        init_cfg=init_cfg)
    theirs.init_weights()
    ours = build_ours(peer, use_abs_pos_embed=False, convert_weights=False,
                      init_cfg=init_cfg)
    ours.init_weights()
    assert ours.convert_weights is False
    for key, value in source.state_dict().items():
        torch.testing.assert_close(theirs.state_dict()[key], value)
    x = _input(peer)
    with torch.no_grad():
        _assert_same_outputs(_eval(theirs)(x), _eval(ours)(x), atol=1e-5)


class _Collect(logging.Handler):
    """The messages a logger emits, kept."""

    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_convert_weights_false_converts_another_layout_and_says_so(
        tmp_path):
    """A file that is not in mmdet's layout (timm's) under
    ``convert_weights=False`` is converted from its keys all the same, and
    the log names the layout."""
    from mmengine.logging import MMLogger
    timm = pytest.importorskip('timm')
    source = timm.create_model(
        'swin_tiny_patch4_window7_224', pretrained=False, num_classes=0,
        embed_dim=32, depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8),
        window_size=4, img_size=64)
    path = str(tmp_path / 'timm.pth')
    torch.save(randomise(source).state_dict(), path)
    handler = _Collect()
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        ours = SwinTransformer(embed_dims=32, depths=(1, 1, 1, 1),
                               num_heads=(1, 2, 4, 8), window_size=4,
                               convert_weights=False,
                               init_cfg=dict(type='Pretrained',
                                             checkpoint=path))
        ours.init_weights()
    finally:
        logger.removeHandler(handler)
    assert any("convert_weights=False" in m and "'timm'" in m
               for m in handler.messages), handler.messages
    torch.testing.assert_close(ours.patch_embed.proj.weight,
                               source.patch_embed.proj.weight)
