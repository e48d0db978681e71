"""Whole released detector checkpoints evaluate unchanged through
tools/test.py: our Swin uses the authors' release parameter names.

Nothing can be downloaded here, so the release checkpoint is built from
mmdet's own model: mmdet 3.3.0's Cascade Mask R-CNN with mmdet's
``SwinTransformer`` (same heads as configs/cascade_swin_t_coco.py), its
backbone keys written in the layout of SwinTransformer/Swin-Transformer-
Object-Detection (mmdet/models/backbones/swin_transformer.py there:
``layers.i.blocks.j.{norm1,attn.qkv,attn.proj,attn.relative_position_bias_table,
attn.relative_position_index,norm2,mlp.fc1,mlp.fc2}``, ``layers.i.downsample.
{reduction,norm}`` in (x0, x1, x2, x3) order, ``patch_embed.proj``,
``norm{i}`` per output) with an mmdet 2.x / mmcv 1.x checkpoint's meta. The
mapping is checked against mmdet's own ``swin_converter`` (release ->
mmdet), not against ours. Then tools/test.py evaluates it with our config,
and mmdet's model with the same weights (its own layout), on 2 coco128
images, and the predictions (boxes, scores, labels, masks) are compared.
"""
import os.path as osp

import numpy as np
import pytest
import torch

from helpers import REPO, run_tools
from helpers.checkpoints import (
    assert_converts_back,
    mmdet_to_release,
    peer_weights,
    perturb,
    predictions,
)
from helpers.coco128 import coco128_files, write_override

CONFIG = osp.join(REPO, 'configs', 'cascade_swin_t_coco.py')
MASK_RCNN = osp.join(REPO, 'configs', 'swin',
                     'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py')
# our config -> the authors' config its release was trained with
RELEASE_NAMES = {
    CONFIG: 'cascade_mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_'
            'giou_4conv1f_adamw_3x_coco.py',
    MASK_RCNN: 'mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_'
               'adamw_1x_coco.py',
}
MMDET_SWIN_T = dict(
    _delete_=True, type='SwinTransformer', embed_dims=96,
    depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=7,
    mlp_ratio=4, qkv_bias=True, qk_scale=None, drop_rate=0.,
    attn_drop_rate=0., drop_path_rate=0.2, patch_norm=True,
    out_indices=(0, 1, 2, 3), with_cp=False, convert_weights=False,
    init_cfg=None)


def mmdet2x_checkpoint(state, classes, config_name):
    """What an mmdet 2.11 / mmcv 1.x runner writes (mmcv
    runner/checkpoint.py save_checkpoint, mmdet tools/train.py meta; the Swin
    repo's runner adds apex's ``amp`` state)."""
    return {
        'meta': {
            'env_info': 'sys.platform: linux\nPython: 3.7.10',
            'config': "model = dict(type='CascadeRCNN')",
            'seed': 0,
            'exp_name': config_name,
            'mmdet_version': '2.11.0abc1234',
            'CLASSES': tuple(classes),
            'mmcv_version': '1.3.1',
            'time': 'Mon May 10 12:00:00 2021',
            'epoch': 36,
            'iter': 131000,
            'hook_msgs': {'last_ckpt': 'work_dirs/epoch_35.pth'},
        },
        'state_dict': state,
        'optimizer': {'state': {}, 'param_groups': [
            {'lr': 1e-6, 'weight_decay': 0.05, 'params': [0, 1]}]},
        'amp': {'loss_scaler0': {'loss_scale': 512.0, 'unskipped': 0}},
    }


def build_release(tmp, config):
    """Configs and checkpoints in ``tmp`` for the zoo ``config``: ours
    (shrunk to coco128), mmdet's model (mmdet's Swin in our config), the
    release checkpoint and mmdet's checkpoint of the same weights."""
    from mmdet.models.backbones.swin import swin_converter

    root, subset, _ = coco128_files(tmp)
    ours = str(tmp / 'ours.py')
    write_override(config, root, subset, ours)
    theirs = str(tmp / 'mmdet_swin.py')
    with open(theirs, 'w') as f:
        f.write(f'_base_ = {ours!r}\nmodel = dict(backbone={MMDET_SWIN_T!r})\n')

    state, backbone, release_backbone, release_state = peer_weights(
        theirs, 'mmdet')

    # mmdet's own converter takes the release layout to exactly its model
    back = swin_converter(release_backbone)
    assert set(back) == {f'backbone.{k}' for k in backbone}
    for key, value in backbone.items():
        torch.testing.assert_close(back[f'backbone.{key}'], value,
                                   rtol=0, atol=0)

    assert any('.mlp.fc1.' in k for k in release_state)
    assert any(k.endswith('attn.relative_position_index')
               for k in release_state)
    from mmdet.datasets import CocoDataset
    classes = CocoDataset.METAINFO['classes']
    paths = dict(ours=ours, theirs=theirs)
    for name, ckpt in (
            ('release', mmdet2x_checkpoint(release_state, classes,
                                           RELEASE_NAMES[config])),
            ('mmdet', {'state_dict': state, 'meta': {}})):
        paths[name] = str(tmp / f'{name}.pth')
        torch.save(ckpt, paths[name])
    paths['tmp'] = tmp
    return paths


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    return build_release(tmp_path_factory.mktemp('release'), CONFIG)


def _masks_agree(a, b):
    """Equal but for pixels on the border, where a probability near the 0.5
    threshold may flip (boxes differ by ~0.01 px between the two
    implementations' float summation orders)."""
    a, b = torch.as_tensor(a).bool(), torch.as_tensor(b).bool()
    return float((a ^ b).sum()) <= 2 + 0.02 * float((a | b).sum())


def assert_same_predictions(ours, ref, atol_box=0.05, atol_score=1e-4):
    """Same detections per image. Scores sorted are compared as vectors
    (continuous even where near-equal scores swap places); each box of ours
    clearly above the cut of the top-k has its twin in the reference: same
    label, box within ``atol_box`` px, masks equal up to border pixels.
    Measured between the two implementations: scores within 2.5e-5, boxes
    0.01 px; a 1% change of every MLP output of ours moves them further."""
    assert len(ours) == len(ref)
    for mine, theirs in zip(ours, ref):
        assert mine['img_id'] == theirs['img_id']
        a, b = mine['pred_instances'], theirs['pred_instances']
        assert len(a['scores']) == len(b['scores']) > 0
        np.testing.assert_allclose(np.sort(a['scores'].numpy()),
                                   np.sort(b['scores'].numpy()),
                                   atol=atol_score, rtol=0)
        cut = float(a['scores'].min()) + 10 * atol_score
        for i in torch.nonzero(a['scores'] > cut).flatten().tolist():
            same = torch.nonzero(
                (b['labels'] == a['labels'][i])
                & ((b['scores'] - a['scores'][i]).abs() <= atol_score)
                & ((b['bboxes'] - a['bboxes'][i]).abs().amax(-1) <= atol_box)
            ).flatten().tolist()
            assert same, (i, a['bboxes'][i], a['scores'][i])
            assert any(_masks_agree(a['masks'][i], b['masks'][j])
                       for j in same), i


@pytest.mark.slow
def test_release_detector_checkpoint_evaluates_unchanged(release):
    """The Swin-Transformer-Object-Detection format through tools/test.py
    with our config, no conversion step: same predictions as mmdet's model
    with mmdet's SwinTransformer and the same weights. mmdet's own whole
    checkpoint (its zoo's layout, converted by the backbone's load
    pre-hook) evaluates the same."""
    tmp = release['tmp']
    outputs = run_tools(
        ['tools/test.py', release['ours'], release['release'], '--out',
         str(tmp / 'release.pkl'), '--work-dir', str(tmp / 'w1')],
        ['tools/test.py', release['theirs'], release['mmdet'], '--out',
         str(tmp / 'mmdet.pkl'), '--work-dir', str(tmp / 'w2')],
        # mmdet's own whole checkpoint (its zoo's Swin layout) with ours
        ['tools/test.py', release['ours'], release['mmdet'], '--out',
         str(tmp / 'zoo.pkl'), '--work-dir', str(tmp / 'w4')])
    for out in outputs:
        assert 'coco/bbox_mAP' in out and 'coco/segm_mAP' in out, out[-3000:]
        assert 'does not match the model' not in out
        assert 'unexpected key' not in out and 'missing key' not in out, \
            out[-3000:]
    reference = predictions(tmp / 'mmdet.pkl')
    assert_same_predictions(predictions(tmp / 'release.pkl'), reference)
    assert_same_predictions(predictions(tmp / 'zoo.pkl'), reference)


@pytest.mark.slow
def test_release_mask_rcnn_checkpoint_evaluates_unchanged(tmp_path):
    """The authors' Mask R-CNN release layout (same backbone layout, mmdet's
    Mask R-CNN heads) with our Mask R-CNN config: the predictions of
    mmdet's model with the same weights."""
    paths = build_release(tmp_path, MASK_RCNN)
    outputs = run_tools(
        ['tools/test.py', paths['ours'], paths['release'], '--out',
         str(tmp_path / 'release.pkl'), '--work-dir', str(tmp_path / 'w1')],
        ['tools/test.py', paths['theirs'], paths['mmdet'], '--out',
         str(tmp_path / 'mmdet.pkl'), '--work-dir', str(tmp_path / 'w2')])
    for out in outputs:
        assert 'coco/segm_mAP' in out, out[-3000:]
        assert 'unexpected key' not in out and 'missing key' not in out, \
            out[-3000:]
    assert_same_predictions(predictions(tmp_path / 'release.pkl'),
                            predictions(tmp_path / 'mmdet.pkl'))


# mmdet's SwinTransformer arguments of the released Swin-S / Swin-B
MMDET_ARCHS = {
    'small': dict(embed_dims=96, depths=[2, 2, 18, 2],
                  num_heads=[3, 6, 12, 24]),
    'base': dict(embed_dims=128, depths=[2, 2, 18, 2],
                 num_heads=[4, 8, 16, 32]),
}


@pytest.mark.parametrize('arch', sorted(MMDET_ARCHS))
def test_release_small_and_base_backbones_compute_what_mmdet_computes(arch):
    """Swin-S and Swin-B releases (Cascade and Mask R-CNN Swin-S, Cascade
    Swin-B: the heads are those of the Swin-T test above): the release
    layout of mmdet's Swin-S/B loads strictly into ours, and the four
    outputs equal mmdet's."""
    from mmdet.models.backbones import SwinTransformer as MMDetSwin

    import mmvisattn  # noqa: F401
    from mmvisattn.models.backbones import SwinTransformer
    torch.manual_seed(0)
    theirs = MMDetSwin(window_size=7, drop_path_rate=0., **MMDET_ARCHS[arch])
    theirs.eval()  # mmdet's Swin.train() returns None: no chaining
    perturb(theirs)
    ours = SwinTransformer(arch=arch).eval()
    ours.load_state_dict(mmdet_to_release(theirs.state_dict()), strict=True)
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        for mine, ref in zip(ours(x), theirs(x)):
            torch.testing.assert_close(mine, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.slow  # its fixture writes ~2 GB of whole-detector releases
def test_release_backbone_keys_load_strictly_into_ours(release):
    """The backbone part, through torch's strict ``load_state_dict`` (the
    path of mmengine's ``load_from``/``resume``): the derived buffers are
    dropped by the layers' load pre-hooks."""
    import mmvisattn  # noqa: F401
    from mmvisattn.models.backbones import SwinTransformer
    ckpt = torch.load(release['release'], weights_only=True)
    state = {k[len('backbone.'):]: v for k, v in ckpt['state_dict'].items()
             if k.startswith('backbone.')}
    model = SwinTransformer(arch='tiny')
    model.load_state_dict(state, strict=True)
    torch.testing.assert_close(model.layers[2].blocks[5].mlp.fc2.weight,
                               state['layers.2.blocks.5.mlp.fc2.weight'])


def test_release_absolute_position_embedding_layout_loads():
    """The detection release keeps ``absolute_pos_embed`` as (1, C, H, W)
    (``ape=True``); it loads into our (1, H*W, C) unchanged in value."""
    import mmvisattn  # noqa: F401
    from mmvisattn.models.backbones import SwinTransformer
    model = SwinTransformer(arch='tiny', use_abs_pos_embed=True,
                            pretrain_img_size=32)
    release = {k: v for k, v in model.state_dict().items()}
    grid = torch.randn(1, 96, 8, 8)
    release['absolute_pos_embed'] = grid
    model.load_state_dict(release, strict=True)
    torch.testing.assert_close(model.absolute_pos_embed.view(1, 8, 8, 96),
                               grid.permute(0, 2, 3, 1))


@pytest.mark.slow
def test_whole_detector_converts_back_to_mmdet_and_the_release(release):
    """The way back: our whole detector checkpoint (the release layout is
    ours) to mmdet 3.x's layout gives exactly mmdet's own checkpoint of the
    same weights, every tensor of the backbone, neck and heads, so mmdet's
    model loads it and predicts what mmdet predicts (the derived position
    index aside, which mmdet rebuilds); and back to the authors' release
    layout gives the release again."""
    tmp = release['tmp']
    mmdet_state = torch.load(release['mmdet'], weights_only=True)[
        'state_dict']
    release_state = torch.load(release['release'], weights_only=False)[
        'state_dict']
    assert_converts_back(release['release'], tmp,
                         dict(mmdet=mmdet_state, official=release_state))
