"""The peers' Swin arguments: their spellings mean what they mean there, and
arguments that only the peer's implementation understands fail with what
to use instead. (That every config the peers install works with only
``type`` changed is tests/test_peer_zoo.py.)"""

import pytest
import torch

import mmvisattn  # noqa: F401
from mmvisattn.models.backbones import SwinTransformer


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
