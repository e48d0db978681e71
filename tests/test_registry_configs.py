"""Registry scope, config inheritance and plugging into mmdet/mmseg models."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import mmvisattn
from helpers import REPO

MAIN_CONFIG = 'swin/cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py'


def test_registry_is_a_scoped_child_of_mmengine():
    from mmengine.registry import MODELS as ROOT
    assert mmvisattn.MODELS.scope == 'mmvisattn'
    assert mmvisattn.MODELS.parent is ROOT
    assert 'SwinTransformer' in mmvisattn.MODELS.module_dict


def test_reachable_from_mmdet_scope_without_shadowing():
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    from mmdet.registry import MODELS

    from mmvisattn.models.backbones import SwinTransformer
    with DefaultScope.overwrite_default_scope('mmdet'):
        ours = MODELS.build(dict(type='mmvisattn.SwinTransformer',
                                 depths=(1, 1, 1, 1)))
        theirs = MODELS.build(dict(type='SwinTransformer',
                                   depths=(1, 1, 1, 1)))
    assert type(ours) is SwinTransformer
    assert type(theirs) is MMDetSwin


def test_plugs_into_mmseg_upernet():
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(
            dict(
                type='EncoderDecoder',
                data_preprocessor=dict(type='SegDataPreProcessor',
                                       size=(64, 64)),
                backbone=dict(type='mmvisattn.SwinTransformer', arch='tiny',
                              depths=(1, 1, 1, 1)),
                decode_head=dict(
                    type='UPerHead',
                    in_channels=[96, 192, 384, 768],
                    in_index=[0, 1, 2, 3],
                    pool_scales=(1, 2, 3, 6),
                    channels=32,
                    num_classes=5,
                    norm_cfg=dict(type='BN'),
                    align_corners=False,
                    loss_decode=dict(type='CrossEntropyLoss'))))
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 64, 64), mode='tensor')
    assert out.shape == (1, 5, 16, 16)


def _check_main_config(cfg):
    assert cfg.model.type == 'CascadeRCNN'
    assert cfg.model.backbone.type == 'mmvisattn.SwinTransformer'
    assert cfg.model.neck.in_channels == [96, 192, 384, 768]
    heads = cfg.model.roi_head.bbox_head
    assert [h.type for h in heads] == ['ConvFCBBoxHead'] * 3
    assert all(h.loss_bbox.type == 'GIoULoss' and h.num_shared_convs == 4
               for h in heads)
    assert cfg.train_cfg.max_epochs == 36
    assert cfg.optim_wrapper.optimizer.type == 'AdamW'
    assert 'mmvisattn' in cfg.custom_imports.imports


def test_paper_config_values():
    cfg = Config.fromfile(osp.join(REPO, 'configs', 'cascade_swin_t_coco.py'))
    _check_main_config(cfg)
    assert cfg.model.backbone.drop_path_rate == 0.2
    assert cfg.optim_wrapper.optimizer.lr == 1e-4
    assert cfg.optim_wrapper.optimizer.weight_decay == 0.05
    keys = cfg.optim_wrapper.paramwise_cfg.custom_keys
    assert keys.relative_position_bias_table.decay_mult == 0.
    assert keys.absolute_pos_embed.decay_mult == 0. and keys.norm.decay_mult == 0.
    milestones = cfg.param_scheduler[1].milestones
    assert milestones == [27, 33]
    assert cfg.train_dataloader.batch_size * 8 == 16
    assert cfg.data_root == 'data/coco/'


@pytest.mark.parametrize('style', ['package', 'path'])
def test_downstream_config_inherits(tmp_path, style):
    base = f'mmvisattn::{MAIN_CONFIG}' if style == 'package' else \
        osp.join(REPO, 'configs', MAIN_CONFIG)
    cfg_file = tmp_path / 'my_detector.py'
    cfg_file.write_text(f"_base_ = '{base}'\n"
                        "model = dict(backbone=dict(drop_path_rate=0.3))\n")
    with mmvisattn.runtime():  # `mmvisattn::` (the tools run inside it)
        cfg = Config.fromfile(str(cfg_file))
    _check_main_config(cfg)
    assert cfg.model.backbone.drop_path_rate == 0.3


@pytest.mark.slow
def test_import_pulls_in_no_analysis_or_tool_code():
    """`import mmvisattn` loads the runtime package only: no analysis
    (FLOP counting) and no tool helpers; the engine (hooks, CPU DDP) is
    loaded when a config or tool asks for it."""
    import subprocess
    import sys
    proc = subprocess.run(
        [sys.executable, '-c', 'import mmvisattn, sys; print(sorted(m for m '
         "in sys.modules if m.startswith('mmvisattn') or m == "
         "'make_demo_data'))"],
        cwd='/', capture_output=True, text=True, timeout=300, check=True)
    loaded = eval(proc.stdout.strip().splitlines()[-1])
    assert 'mmvisattn.models.backbones.swin' in loaded
    assert not [m for m in loaded if m.startswith(
        ('mmvisattn.analysis', 'mmvisattn.cli', 'mmvisattn.engine',
         'mmvisattn.datasets.demo_data', 'make_demo_data'))], loaded


@pytest.mark.slow  # optimizer steps by hand (pytest.ini)
def test_demo_optimizer_is_fused_adamw_with_the_loops_update(tmp_path):
    """The demo's optimizer, as mmengine builds it from the config, is
    torch's fused AdamW (its step is a quarter of the per-parameter loop's on
    the CPU) with the paper's parameter groups, and one step updates every
    parameter as the loop (``fused=False``) does."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.optim import build_optim_wrapper

    from helpers.det_config import small_det_config
    register_all_modules()
    cfg = Config.fromfile(small_det_config(tmp_path))
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(cfg.model)
    wrappers = {}
    for fused in (True, False):
        optim_cfg = cfg.optim_wrapper.copy()
        optim_cfg['optimizer'] = dict(optim_cfg['optimizer'], fused=fused)
        wrappers[fused] = build_optim_wrapper(model, optim_cfg)
    built = wrappers[True].optimizer
    assert type(built) is torch.optim.AdamW and built.defaults['fused']
    assert cfg.optim_wrapper.optimizer.fused is True
    # the paper's groups: no weight decay on norms and position tables
    decays = {g['weight_decay'] for g in built.param_groups}
    assert decays == {0.0, 0.05}
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    grads = {n: torch.randn_like(p) for n, p in model.named_parameters()}
    after = {}
    for fused, wrapper in wrappers.items():
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(start[n])
                p.grad = grads[n].clone()
        for _ in range(2):  # the second step reads the moments of the first
            wrapper.step()
        after[fused] = {n: p.detach().clone()
                        for n, p in model.named_parameters()}
    for n in start:
        assert not torch.equal(after[True][n], start[n]), n
        torch.testing.assert_close(after[True][n], after[False][n],
                                   rtol=1e-5, atol=1e-7)
