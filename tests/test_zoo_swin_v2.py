"""The Swin V2 zoo (configs/swin_v2/): each config as mmengine builds it, its
metafile row against the model it builds, and V2-T's Cascade Mask R-CNN and
UperNet trained and tested end to end through tools/train.py and
tools/test.py (shrunk to coco128 / camvid_ade, as the V1 zoo tests do)."""
import glob
import os.path as osp

import pytest
import yaml
from mmengine.config import Config

from helpers import REPO
from helpers.camvid import train_and_evaluate_on_camvid
from helpers.coco128 import train_and_evaluate_on_coco128

ZOO_DIR = osp.join(REPO, 'configs', 'swin_v2')
RELEASE = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/'
W16 = dict(window_size=16, pretrained_window_sizes=(16, 16, 16, 8))
# name -> the backbone's arch, windows and pre-trained file
SPEC = {
    'cascade-mask-rcnn_swinv2-t-w16_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch='tiny', drop_path_rate=0.2, **W16,
         ckpt='swinv2_tiny_patch4_window16_256.pth'),
    'cascade-mask-rcnn_swinv2-s-w16_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch='small', drop_path_rate=0.2, **W16,
         ckpt='swinv2_small_patch4_window16_256.pth'),
    'cascade-mask-rcnn_swinv2-b-w16_fpn_giou-4conv1f_ms-crop-3x_coco.py':
    dict(arch='base', drop_path_rate=0.3, **W16,
         ckpt='swinv2_base_patch4_window16_256.pth'),
    'upernet_swinv2-t-w16_8xb2-160k_ade20k-512x512.py':
    dict(arch='tiny', drop_path_rate=0.3, **W16,
         ckpt='swinv2_tiny_patch4_window16_256.pth'),
    'upernet_swinv2-s-w16_8xb2-160k_ade20k-512x512.py':
    dict(arch='small', drop_path_rate=0.3, **W16,
         ckpt='swinv2_small_patch4_window16_256.pth'),
    'upernet_swinv2-b-w16_8xb2-160k_ade20k-512x512.py':
    dict(arch='base', drop_path_rate=0.3, **W16,
         ckpt='swinv2_base_patch4_window16_256.pth'),
    'swinv2-t-w8_16xb64_300e_in1k-256px.py':
    dict(arch='tiny', drop_path_rate=0.2, window_size=8, ckpt=None),
}


def test_every_config_is_specified_here():
    found = {osp.basename(p) for p in glob.glob(osp.join(ZOO_DIR, '*.py'))}
    assert found == set(SPEC)


@pytest.mark.parametrize('name', sorted(SPEC))
def test_config_names_the_v2_backbone_and_its_release(name):
    spec = dict(SPEC[name])
    backbone = Config.fromfile(osp.join(ZOO_DIR, name)).model.backbone
    assert backbone.type == 'mmvisattn.SwinTransformerV2'
    ckpt = spec.pop('ckpt')
    for key, value in spec.items():
        assert backbone.get(key, 8 if key == 'window_size' else None) == \
            value, key
    if ckpt is None:
        assert backbone.get('init_cfg') is None
    else:
        assert backbone.init_cfg.checkpoint == RELEASE + ckpt
    keys = Config.fromfile(osp.join(
        ZOO_DIR, name)).optim_wrapper.paramwise_cfg.custom_keys
    # the authors' no_weight_decay_keywords, on top of the V1 recipe's
    assert {k.lstrip('.') for k in keys} >= {'cpb_mlp', 'logit_scale'}


def _size(value):
    return float(str(value)[:-1])


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(SPEC))
def test_metafile_parameters_are_the_built_models(name):
    """Each row's Parameters is what mmengine builds from the config (its
    FLOPs: tools/analysis_tools/get_flops.py, the README's command)."""
    from mmengine.registry import MODELS, init_default_scope
    with open(osp.join(ZOO_DIR, 'metafile.yml')) as f:
        rows = {m['Name']: m for m in yaml.safe_load(f)['Models']}
    cfg = Config.fromfile(osp.join(ZOO_DIR, name))
    init_default_scope(cfg.default_scope)
    import mmvisattn  # noqa: F401
    model = MODELS.build(cfg.model)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    listed = rows[osp.splitext(name)[0]]['Metadata']['Parameters']
    assert round(params) == _size(listed), (params, listed)


@pytest.mark.slow
def test_cascade_swinv2_t_trains_and_tests_on_coco128(tmp_path):
    train_and_evaluate_on_coco128(
        osp.join(ZOO_DIR, 'cascade-mask-rcnn_swinv2-t-w16_fpn_giou-4conv1f_'
                 'ms-crop-3x_coco.py'), tmp_path)


@pytest.mark.slow
def test_upernet_swinv2_t_trains_and_tests_on_camvid_ade(tmp_path):
    train_and_evaluate_on_camvid(
        osp.join(ZOO_DIR, 'upernet_swinv2-t-w16_8xb2-160k_ade20k-512x512.py'),
        tmp_path)
