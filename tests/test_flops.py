"""Whole-detector params/FLOPs against the Swin paper's Table 2.

The paper counted detectors with mmdet 2.x's get_flops (mmcv 1.x module
hooks on ``forward_dummy``: box heads on 1000 proposals, mask heads on 100)
with the backbone's attention matmuls included; ``convention='paper'`` of
mmvisattn.analysis.complexity (tools/) reproduces it. The models are built here from
mmdet's configs with our backbone, so these tests do not depend on the zoo
configs.
"""
import os.path as osp

import pytest
import torch

from helpers import REPO, load_tool
from mmvisattn.analysis import complexity, flops

SHAPE = (3, 800, 1280)  # the paper's 1280x800

CASCADE_SWIN_T = """
_base_ = ['mmdet::cascade_rcnn/cascade-mask-rcnn_r50_fpn_1x_coco.py']


def _head(stds):
    return dict(
        type='ConvFCBBoxHead', num_shared_convs=4, num_shared_fcs=1,
        in_channels=256, conv_out_channels=256, fc_out_channels=1024,
        roi_feat_size=7, num_classes=80,
        bbox_coder=dict(type='DeltaXYWHBBoxCoder',
                        target_means=[0., 0., 0., 0.], target_stds=stds),
        reg_class_agnostic=False, reg_decoded_bbox=True,
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=False,
                      loss_weight=1.0),
        loss_bbox=dict(type='GIoULoss', loss_weight=10.0))


model = dict(
    backbone=dict(_delete_=True, type='mmvisattn.SwinTransformer',
                  arch='tiny', drop_path_rate=0.2,
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://example.invalid/x.pth')),
    neck=dict(in_channels=[96, 192, 384, 768]),
    roi_head=dict(bbox_head=[_head([0.1, 0.1, 0.2, 0.2]),
                             _head([0.05, 0.05, 0.1, 0.1]),
                             _head([0.033, 0.033, 0.067, 0.067])]))
"""

ATSS_R50 = "_base_ = 'mmdet::atss/atss_r50_fpn_1x_coco.py'\n"

ATSS_SWIN_T = ATSS_R50 + """
model = dict(
    backbone=dict(_delete_=True, type='mmvisattn.SwinTransformer',
                  arch='tiny', drop_path_rate=0.2, out_indices=(1, 2, 3)),
    neck=dict(in_channels=[192, 384, 768], start_level=0))
"""

UPERNET_SWIN_T = """
_base_ = 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'  # noqa
model = dict(
    pretrained=None,
    backbone=dict(_delete_=True, type='mmvisattn.SwinTransformer',
                  arch='tiny', drop_path_rate=0.3))
"""


@pytest.fixture(scope='module')
def tool():
    return load_tool('tools/analysis_tools/get_flops.py')


@pytest.fixture(scope='module')
def configs(tmp_path_factory):
    root = tmp_path_factory.mktemp('flops_configs')
    paths = {}
    for name, text in [('cascade_swin_t', CASCADE_SWIN_T),
                       ('atss_r50', ATSS_R50), ('atss_swin_t', ATSS_SWIN_T),
                       ('upernet_swin_t', UPERNET_SWIN_T)]:
        paths[name] = str(root / f'{name}.py')
        with open(paths[name], 'w') as f:
            f.write(text)
    return paths


def _build(tool, path):
    model, scope = flops.build_model(flops.load_config(path))
    assert scope == 'mmdet'
    return model


@pytest.fixture(scope='module')
def atss_swin_t(tool, configs):
    return _build(tool, configs['atss_swin_t'])


def _check(result, params_m, flops_g, tol=0.03):
    params, flops = result['params'] / 1e6, result['flops'] / 1e9
    assert abs(params / params_m - 1) <= tol, (params, params_m)
    assert abs(flops / flops_g - 1) <= tol, (flops, flops_g)


def test_cascade_mask_rcnn_swin_t_matches_paper(tool, configs):
    """86M / 745G (Table 2(a)); we count 85.6M / 745.5G."""
    model = _build(tool, configs['cascade_swin_t'])
    # no weights were to be downloaded
    assert model.backbone.init_cfg is None
    result = complexity.model_complexity(model, SHAPE, 'paper')
    _check(result, 86, 745)
    _check(result, 86, 745, tol=0.01)  # it is much closer than 3%
    parts = complexity.group_by_prefix(result['by_module'], 2)
    # 1000 proposals x 3 stages of 4conv1fc box heads; 100 RoIs x 3 masks
    assert abs(parts['roi_head.bbox_head'] / 1e9 - 386.7) < 0.5, parts
    assert abs(parts['roi_head.mask_head'] / 1e9 - 159.2) < 0.5, parts


def test_atss_matches_paper(tool, configs, atss_swin_t):
    """ATSS Swin-T 36M / 215G and R-50 32M / 205G (Table 2(a))."""
    _check(complexity.model_complexity(atss_swin_t, SHAPE, 'paper'), 36, 215)
    r50 = _build(tool, configs['atss_r50'])
    _check(complexity.model_complexity(r50, SHAPE, 'paper'), 32, 205)


def test_upernet_swin_t_matches_paper(tool, configs):
    """Segmentors default to 512x2048: UperNet Swin-T 60M / 945G (Table 3),
    decode head only (mmseg 0.x's forward_dummy has no auxiliary head)."""
    result = tool.count_config(configs['upernet_swin_t'])
    assert result['scope'] == 'mmseg' and result['shape'] == (512, 2048)
    _check(result, 60, 945, tol=0.01)
    assert not any(k.startswith('auxiliary_head')
                   for k in result['by_module'])


def test_fvcore_convention_counts_the_same_forward(tool, configs):
    """--convention fvcore traces the dummy forward: on a conv-only model it
    agrees with the module hooks up to what they count extra (conv bias,
    norms, ReLU) -- here within 1%."""
    model = _build(tool, configs['atss_r50'])
    fv = complexity.model_complexity(model, (3, 128, 160), 'fvcore')
    hooks = complexity.model_complexity(model, (3, 128, 160), 'mmcv1')
    assert abs(fv['flops'] / hooks['flops'] - 1) < 0.01, (fv, hooks)
    assert {k.split('.')[0] for k in fv['by_module']} == \
        {'backbone', 'neck', 'bbox_head'}


def _swin_t_attention_macs(h, w, window=7):
    """QK^T + AV of every Swin-T block on the padded window grid."""
    total = 0
    h, w = h // 4, w // 4
    for dims, depth in zip((96, 192, 384, 768), (2, 2, 6, 2)):
        hp, wp = -(-h // window) * window, -(-w // window) * window
        total += depth * hp * wp * window**2 * dims * 2
        h, w = -(-h // 2), -(-w // 2)
    return total


def test_paper_convention_adds_backbone_attention(atss_swin_t):
    """The paper's counts = mmcv 1.x module hooks + window attention's
    matmuls (3.1G for Swin-T at 1280x800)."""
    paper = complexity.model_complexity(atss_swin_t, SHAPE, 'paper')
    hooks = complexity.model_complexity(atss_swin_t, SHAPE, 'mmcv1')
    expected = _swin_t_attention_macs(*SHAPE[1:])
    assert paper['flops'] - hooks['flops'] == expected
    assert abs(expected / 1e9 - 3.1) < 0.05
    attn = {k: v for k, v in paper['by_module'].items()
            if k.endswith('(attention matmuls)')}
    assert attn and all(k.startswith('backbone.') for k in attn)
    assert sum(attn.values()) == expected


def _tiled_rswatt_macs(h, w, window, channels):
    """QK^T + AV of one RSWAtt scale as its tiled kernel computes them:
    M x M query tiles, each over (2M - 1)^2 keys."""
    tiles = -(-h // window) * -(-w // window)
    return tiles * window**2 * (2 * window - 1)**2 * 2 * channels


def test_paper_convention_counts_rswatt_neck_and_head_attention():
    """RSWAttNeck's and RSWAttHead's attention matmuls are counted (they
    were left out as outside the backbone): a conv 'backbone', the neck on
    two levels (12x10, 6x5; windows 3 and 5) and the head (one layer at
    12x10, window 3), 16 channels."""
    from mmvisattn.models.decode_heads import RSWAttHead
    from mmvisattn.models.plugins import RSWAttNeck

    class Toy(torch.nn.Module):

        def __init__(self):
            super().__init__()
            self.backbone = torch.nn.Conv2d(3, 16, 4, 4)
            self.neck = RSWAttNeck(16, 2, num_heads=2, scale_windows=(3, 5))
            self.decode_head = RSWAttHead(
                in_channels=[16, 16], in_index=[0, 1], channels=16,
                num_classes=3, num_layers=1, num_heads=2, scale_windows=(3, ))

        def forward(self, img):
            x = self.backbone(img)
            levels = (x, torch.nn.functional.max_pool2d(x, 2))
            return self.decode_head(list(self.neck(levels)))

    model = Toy()

    def forward(m, img):
        return m(img)

    paper = complexity.model_complexity(model, (3, 48, 40), 'paper', forward)
    hooks = complexity.model_complexity(model, (3, 48, 40), 'mmcv1', forward)
    neck = sum(_tiled_rswatt_macs(h, w, m, 16)
               for h, w in ((12, 10), (6, 5)) for m in (3, 5))
    head = _tiled_rswatt_macs(12, 10, 3, 16)
    attn = {k: v for k, v in paper['by_module'].items()
            if k.endswith('(attention matmuls)')}
    assert sum(v for k, v in attn.items() if k.startswith('neck.')) == neck
    assert sum(v for k, v in attn.items()
               if k.startswith('decode_head.')) == head
    assert paper['flops'] - hooks['flops'] == neck + head


def test_shape_only_counts_like_real_compute(atss_swin_t):
    """Skipping the arithmetic of convs/linears/attention changes nothing."""
    fast = complexity.model_complexity(atss_swin_t, (3, 96, 160), 'paper')
    slow = complexity.model_complexity(atss_swin_t, (3, 96, 160), 'paper',
                                       shape_only=False)
    assert fast['by_module'] == slow['by_module']
    # and the model works normally afterwards (stubs removed)
    assert all('forward' not in m.__dict__ for m in atss_swin_t.modules())


def test_attention_macs_of_fused_attention():
    q = torch.empty(4, 3, 49, 32)
    v = torch.empty(4, 3, 49, 16)
    F = torch.nn.functional
    macs = complexity.attention_macs(F.scaled_dot_product_attention,
                                     (q, q, v), {})
    assert macs == 4 * 3 * 49 * 49 * (32 + 16)
    assert complexity.attention_macs(torch.matmul, (q, q.transpose(-1, -2)),
                                     {}) == 4 * 3 * 49 * 32 * 49
    assert complexity.attention_macs(torch.add, (q, q), {}) == 0


def test_cli_config_and_table(tool, configs, tmp_path, capsys):
    """CONFIG mode with --breakdown, and --table on a folder holding one zoo
    config (the others are reported as skipped)."""
    assert tool.main([configs['atss_r50'], '--shape', '256', '320',
                      '--breakdown']) == 0
    out = capsys.readouterr().out
    assert 'input 3x256x320' in out and 'backbone' in out \
        and 'bbox_head' in out
    zoo = tmp_path / 'zoo'
    zoo.mkdir()
    (zoo / 'atss_r50_fpn_ms-3x_coco.py').write_text(
        ATSS_R50 + "default_scope = 'mmdet'\n")
    assert tool.main(['--table', '--config-dir', str(zoo)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines()
               if line.startswith('atss_r50_fpn_ms-3x_coco.py'))
    assert '32' in row and '205' in row
    assert 'skipped' in out


# RepPoints v2 head locations at 1280x800, strides 8..128 (P6, P7 rounded
# up): 100x160 + 50x80 + 25x40 + 13x20 + 7x10
REPPOINTS_LOCATIONS = 16000 + 4000 + 1000 + 260 + 70
# a deformable conv over 256 features + 6 corner maps, 3x3, 256 out
DEFORM_CONV_MACS = REPPOINTS_LOCATIONS * (256 + 6) * 9 * 256


@pytest.mark.parametrize('name, params_m, flops_g', [
    ('reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py', 42, 274),
    ('reppoints-v2_swin-t-p4-w7_bifpn_giou-qfl_ms-480-960-3x_coco.py', 45,
     283),
])
def test_reppoints_v2_table2_matches_paper(tool, name, params_m, flops_g):
    """The Swin authors' RepPoints v2 (BiFPN, 2 repeats): 41.9M / 273.2G
    (R-50) and 44.9M / 282.5G (Swin-T) against Table 2(a)'s 42M / 274G and
    45M / 283G, with the two deformable convs per level counted as 3x3
    convs (mmcv's table has no deformable conv)."""
    result = tool.count_config(osp.join(REPO, 'configs', 'swin', name))
    _check(result, params_m, flops_g, tol=0.01)
    parts = complexity.group_by_prefix(result['by_module'], 2)
    for conv in ('reppoints_cls_conv', 'reppoints_pts_refine_conv'):
        assert parts[f'bbox_head.{conv}'] == DEFORM_CONV_MACS, parts
    # the BiFPN: 1x1 projections of C3-C5 and twice max-pooled C5, then
    # 8 fusion convs (3x3, 256) in each of 2 repeats, GN, fusion weights
    channels = [512, 1024, 2048] if 'r50' in name else [192, 384, 768]
    neck = result['params_by_module']['neck']
    projections = sum(c * 256 for c in channels + channels[-1:] * 2)
    fusion_convs = 2 * 8 * 256 * 256 * 9
    norms = 2 * 256 * (5 + 2 * 8)
    weights = 2 * (4 * 2 + 3 * 3 + 2)
    assert neck == projections + fusion_convs + norms + weights


def test_reppoints_v2_fpn_model_counts(tool):
    """The RepPoints v2 authors' own FPN model (not the paper's Table 2
    model; configs/swin/README.md has the account): 38.5M / 255.3G, of
    which the deformable convs are 2 x 12.9G."""
    path = osp.join(REPO, 'configs', 'swin',
                    'reppoints-v2_r50_fpn_giou_ms-3x_coco.py')
    result = tool.count_config(path)
    assert abs(result['params'] / 1e6 - 38.49) < 0.01, result['params']
    assert abs(result['flops'] / 1e9 - 255.3) < 0.1, result['flops']
    mmcv1 = tool.count_config(path, convention='mmcv1')
    assert result['flops'] - mmcv1['flops'] == 2 * DEFORM_CONV_MACS
