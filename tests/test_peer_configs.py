"""Peers' own Swin configs, as installed with mmdet, mmseg and mmpretrain,
work with only the backbone's ``type`` changed to ``mmvisattn.SwinTransformer``
and compute what the peer computes with the same weights, loaded from the
peer's own state dict as it is; arguments that only the peer's
implementation understands fail with what to use instead."""
import copy
import glob
import os.path as osp

import pytest
import torch
from mmengine.config import Config

import mmvisattn  # noqa: F401
from helpers import randomise, sampled, skip_weight_init
from mmvisattn.models.backbones import SwinTransformer


def _peer_configs(package, folder):
    module = pytest.importorskip(package)
    root = osp.join(osp.dirname(module.__file__), '.mim', 'configs', folder)
    return sorted(glob.glob(osp.join(root, '*.py')))


def _unique_backbones(paths):
    """One (config name, backbone dict) per distinct backbone (the same
    backbone recurs with other data or heads), init_cfg aside: it names a
    download, never fetched here."""
    seen = {}
    for path in paths:
        backbone = Config.fromfile(path).model.backbone.to_dict()
        backbone.pop('init_cfg', None)
        seen.setdefault(repr(sorted(backbone.items())),
                        (osp.basename(path), backbone))
    return list(seen.values())


DET_SEG = (
    [('mmdet', name, b)
     for name, b in _unique_backbones(_peer_configs('mmdet', 'swin'))] +
    [('mmseg', name, b)
     for name, b in _unique_backbones(_peer_configs('mmseg', 'swin'))])


@pytest.mark.parametrize('package,name,backbone', DET_SEG,
                         ids=[f'{p}:{n}' for p, n, _ in DET_SEG])
def test_detection_and_segmentation_configs_change_only_type(
        package, name, backbone):
    registry = __import__(f'{package}.registry', fromlist=['MODELS']).MODELS
    # every weight is set below: randomised, then copied into ours
    with skip_weight_init():
        peer = randomise(registry.build(copy.deepcopy(backbone)))
        ours = SwinTransformer(**{k: v for k, v in backbone.items()
                                  if k != 'type'}).eval()
        # the config builds through the registry with only `type` changed
        built = registry.build(
            dict(backbone, type='mmvisattn.SwinTransformer'))
    peer.eval()  # mmdet's and mmseg's train() return None
    assert isinstance(built, SwinTransformer)
    # the peer's own layout loads as it is (the backbone's load pre-hook)
    ours.load_state_dict(peer.state_dict(), strict=True)
    x = torch.randn(1, backbone.get('in_channels', 3), 72, 104)
    with torch.no_grad():
        theirs, mine = peer(x), ours(x)
    assert len(theirs) == len(mine) == len(backbone['out_indices'])
    for a, b in zip(theirs, mine):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)


CLS = _unique_backbones(_peer_configs('mmpretrain', 'swin_transformer'))


# the base and large classifiers in the slow tier (tens of seconds to build)
@pytest.mark.parametrize(
    'name,backbone',
    sampled(CLS, lambda nb: not any(s in nb[0] for s in ('base', 'large')),
            ids=[n for n, _ in CLS]))
def test_mmpretrain_classifier_configs_change_only_type(name, backbone):
    """The whole classifier of the config, peer's and ours, give the same
    logits: mmpretrain's spelling img_size brings its classifier semantics
    (pad_small_map=False: the stage whose map is one window is not
    shifted)."""
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    path = osp.join(osp.dirname(_peer_configs('mmpretrain',
                                              'swin_transformer')[0]), name)
    cfg = Config.fromfile(path).model
    cfg.pop('train_cfg', None)  # Mixup/CutMix: training only
    cfg.backbone.pop('init_cfg', None)
    cfg.head.pop('init_cfg', None)
    # every weight that computes the logits is set below: randomised, then
    # copied into ours
    with DefaultScope.overwrite_default_scope('mmpretrain'), \
            skip_weight_init():
        peer = randomise(MODELS.build(copy.deepcopy(cfg)))
        peer.eval()
        cfg.backbone.type = 'mmvisattn.SwinTransformer'
        ours = MODELS.build(cfg).eval()
    assert isinstance(ours.backbone, SwinTransformer)
    assert ours.backbone.pad_small_map is False
    # the peer's whole model, its own layout, loads as it is
    result = ours.load_state_dict(peer.state_dict(), strict=False)
    # mmpretrain outputs stage 4 only; our other output norms are unused
    assert not result.unexpected_keys, result
    assert all(k.startswith(('backbone.norm0', 'backbone.norm1',
                             'backbone.norm2')) for k in result.missing_keys)
    window = ours.backbone.window_size
    x = torch.randn(1, 3, 32 * window, 32 * window)
    with torch.no_grad():
        theirs = peer(x, mode='tensor')
        mine = ours(x, mode='tensor')
    torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('kwargs,words', [
    (dict(strides=(4, 2, 1, 2)), 'strides'),
    (dict(patch_size=4, strides=(2, 2, 2, 2)), 'set patch_size'),
    (dict(stage_cfgs=dict(block_cfgs=dict(shift=False))), 'stage_cfgs'),
    (dict(stage_cfgs=[dict(block_cfgs=dict(window_size=7))] * 3 +
          [dict(block_cfgs=dict(window_size=12))]), 'different windows'),
    (dict(patch_cfg=dict(padding='same')), 'patch_cfg'),
    (dict(pretrained='a.pth', init_cfg=dict(type='Pretrained',
                                            checkpoint='b.pth')),
     'not both'),
    (dict(img_size=384, pretrain_img_size=256), 'disagree'),
])
def test_peer_only_arguments_fail_with_what_to_use(kwargs, words):
    with pytest.raises(ValueError, match=words):
        SwinTransformer(depths=(1, 1, 1, 1), **kwargs)


def test_peer_spellings_mean_what_they_mean_there():
    small = dict(depths=(1, 1, 1, 1), num_heads=(3, 6, 12, 24))
    assert SwinTransformer(arch='T').depths == (2, 2, 6, 2)
    assert SwinTransformer(arch='s').depths == (2, 2, 18, 2)
    model = SwinTransformer(pretrained='x.pth', **small)
    assert model.init_cfg == dict(type='Pretrained', checkpoint='x.pth')
    assert SwinTransformer(stage_cfgs=dict(block_cfgs=dict(window_size=12)),
                           **small).window_size == 12
    # pretrain_img_size as (h, w): the absolute embedding's grid
    model = SwinTransformer(use_abs_pos_embed=True,
                            pretrain_img_size=(128, 192), **small).eval()
    assert model.absolute_pos_embed.shape == (1, 32 * 48, 96)
    assert model.pretrain_grid == (32, 48)
    with torch.no_grad():
        assert model(torch.randn(1, 3, 96, 96))[0].shape == (1, 96, 24, 24)
    # the classifier semantics refuse a map smaller than a window
    model = SwinTransformer(pad_small_map=False, **small).eval()
    with pytest.raises(ValueError, match='pad_small_map'):
        model(torch.randn(1, 3, 128, 128))  # stage 4: 4x4 < 7x7
