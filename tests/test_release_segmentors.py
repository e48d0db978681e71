"""Whole released segmentor checkpoints evaluate unchanged through
tools/test.py with our UperNet config.

Nothing can be downloaded here, so each checkpoint is built from mmseg's own
model: mmseg 1.x's UperNet with mmseg's ``SwinTransformer`` inside our
config (Swin-T, the same heads). From its weights:

- the authors' release (SwinTransformer/Swin-Transformer-Semantic-
  Segmentation, mmseg 0.11): backbone keys in that repository's layout
  (mmseg/models/backbones/swin_transformer.py there, the same names as the
  detection release), checked against mmseg's own ``swin2mmseg`` converter;
  an mmseg 0.x / mmcv 1.x checkpoint's ``meta`` (``CLASSES``, ``PALETTE``);
- the mmseg 1.x zoo's whole checkpoint (mmseg's own Swin layout).

tools/test.py then evaluates both with our config, and mmseg's model with
the mmseg checkpoint, on 2 camvid_ade images; the dumped segmentation
logits and maps are compared.
"""
import os.path as osp

import pytest
import torch

from helpers import REPO, load_tool, run_tools, shared_dataset
from helpers.camvid import write_camvid_config
from helpers.checkpoints import assert_converts_back, peer_weights, predictions

CONFIG = osp.join(REPO, 'configs', 'swin',
                  'upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py')
# mmseg's SwinTransformer with the arguments of its own Swin-T UperNet
MMSEG_SWIN_T = dict(
    _delete_=True, type='SwinTransformer', pretrain_img_size=224,
    embed_dims=96, patch_size=4, window_size=7, mlp_ratio=4,
    depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], strides=(4, 2, 2, 2),
    out_indices=(0, 1, 2, 3), qkv_bias=True, qk_scale=None,
    patch_norm=True, drop_rate=0., attn_drop_rate=0., drop_path_rate=0.3,
    use_abs_pos_embed=False, act_cfg=dict(type='GELU'),
    norm_cfg=dict(type='LN', requires_grad=True), init_cfg=None)


def mmseg0x_checkpoint(state, metainfo):
    """What mmseg 0.11's IterBasedRunner (mmcv 1.x save_checkpoint, mmseg
    tools/train.py meta) writes."""
    return {
        'meta': {
            'env_info': 'sys.platform: linux\nPython: 3.7.10',
            'config': "model = dict(type='EncoderDecoder')",
            'seed': 0,
            'exp_name': 'upernet_swin_tiny_patch4_window7_512x512_160k_'
                        'ade20k.py',
            'mmseg_version': '0.11.0+abc1234',
            'mmcv_version': '1.3.0',
            'CLASSES': tuple(metainfo['classes']),
            'PALETTE': [list(c) for c in metainfo['palette']],
            'time': 'Thu Apr 15 12:00:00 2021',
            'iter': 160000,
            'epoch': 0,
            'hook_msgs': {'last_ckpt': 'work_dirs/iter_160000.pth'},
        },
        'state_dict': state,
        'optimizer': {'state': {}, 'param_groups': [
            {'lr': 0.0, 'weight_decay': 0.01, 'params': [0, 1]}]},
    }


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('seg_release')
    root = shared_dataset('camvid_ade')
    ours = str(tmp / 'ours.py')
    metainfo = write_camvid_config(CONFIG, root, ours)
    theirs = str(tmp / 'mmseg_swin.py')
    with open(theirs, 'w') as f:
        f.write(f'_base_ = {ours!r}\nmodel = dict(backbone={MMSEG_SWIN_T!r})\n')
    state, backbone, release_backbone, release_state = peer_weights(
        theirs, 'mmseg')
    # mmseg's own converter takes the release layout to exactly its model
    convert_swin = load_tool(osp.join(
        osp.dirname(__import__('mmseg').__file__), '.mim', 'tools',
        'model_converters', 'swin2mmseg.py')).convert_swin
    back = convert_swin(release_backbone)
    assert set(back) == set(backbone)
    for key, value in backbone.items():
        torch.testing.assert_close(back[key], value, rtol=0, atol=0)

    paths = dict(ours=ours, theirs=theirs, tmp=tmp)
    for name, ckpt in (
            ('release', mmseg0x_checkpoint(release_state, metainfo)),
            ('mmseg', {'state_dict': state,
                       'meta': {'dataset_meta': metainfo}})):
        paths[name] = str(tmp / f'{name}.pth')
        torch.save(ckpt, paths[name])
    return paths


def assert_same_segmentation(ours, ref):
    """Logits within 1e-4 (measured between the two implementations: a few
    1e-6); the maps equal where the top two classes are not within that."""
    assert len(ours) == len(ref) > 0
    for mine, theirs in zip(ours, ref):
        assert mine['img_path'] == theirs['img_path']
        a = mine['seg_logits']['data']
        b = theirs['seg_logits']['data']
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
        top2 = b.topk(2, dim=0).values
        clear = (top2[0] - top2[1]) > 2e-4
        pa = mine['pred_sem_seg']['data'][0]
        pb = theirs['pred_sem_seg']['data'][0]
        assert torch.equal(pa[clear], pb[clear])


@pytest.mark.slow
def test_release_segmentor_checkpoints_evaluate_unchanged(release):
    """The Swin-Transformer-Semantic-Segmentation format and the mmseg 1.x
    zoo's whole checkpoint, through tools/test.py with our config, no
    conversion step: the logits of mmseg's model with the same weights."""
    tmp = release['tmp']
    outputs = run_tools(
        ['tools/test.py', release['ours'], release['release'], '--out',
         str(tmp / 'release.pkl'), '--work-dir', str(tmp / 'w1')],
        ['tools/test.py', release['ours'], release['mmseg'], '--out',
         str(tmp / 'zoo.pkl'), '--work-dir', str(tmp / 'w2')],
        ['tools/test.py', release['theirs'], release['mmseg'], '--out',
         str(tmp / 'mmseg.pkl'), '--work-dir', str(tmp / 'w3')])
    for out in outputs:
        assert 'mIoU' in out, out[-3000:]
        assert 'unexpected key' not in out and 'missing key' not in out, \
            out[-3000:]
    reference = predictions(tmp / 'mmseg.pkl')
    assert_same_segmentation(predictions(tmp / 'release.pkl'), reference)
    assert_same_segmentation(predictions(tmp / 'zoo.pkl'), reference)


@pytest.mark.slow
def test_whole_segmentor_converts_back_to_mmseg_and_the_release(release):
    """The way back for segmentors: our whole UperNet checkpoint (release
    layout) to mmseg 1.x's layout is exactly mmseg's own checkpoint of the
    same weights, so mmseg's model loads it strictly; back to the release
    layout gives the release again (the derived position index aside)."""
    tmp = release['tmp']
    want_mmseg = torch.load(release['mmseg'], weights_only=True)[
        'state_dict']
    want_release = torch.load(release['release'], weights_only=False)[
        'state_dict']
    assert_converts_back(release['release'], tmp,
                         dict(mmseg=want_mmseg, official=want_release))
