"""TNT: equal to mmpretrain's and timm's classifiers with the same weights,
every checkpoint layout, any input size, the pyramid a neck expects, the
layer-decay optimizer rules, and the Cascade Mask R-CNN / UperNet configs
trained and evaluated on coco128 / camvid_ade."""
import copy
import os.path as osp
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from helpers import REPO, load_tool
from helpers.camvid import loss_step_on_camvid
from helpers.checkpoints import tnt_official_from_timm
from helpers.coco128 import loss_step_on_coco128
from mmvisattn.models.backbones import TNT
from mmvisattn.models.utils import detect_tnt_layout, tnt_any_to_mmvisattn

CASCADE = osp.join(REPO, 'configs', 'tnt',
                   'cascade-mask-rcnn_tnt-s-p16_fpn_giou-4conv1f_ms-crop-3x_'
                   'coco.py')
UPERNET = osp.join(REPO, 'configs', 'tnt',
                   'upernet_tnt-s-p16_8xb2-160k_ade20k-512x512.py')


def _perturbed(module, seed=0):
    """Weights away from their init (zeros / ones would hide mix-ups)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return module.eval()


@pytest.fixture(scope='module')
def mmpretrain_classifiers():
    from mmpretrain.models import ImageClassifier
    out = {}
    for arch, dims in (('small', 384), ('base', 640)):
        torch.manual_seed(0)
        model = ImageClassifier(
            backbone=dict(type='TNT', arch=arch),
            head=dict(type='LinearClsHead', num_classes=1000,
                      in_channels=dims))
        model.init_weights()
        out[arch] = _perturbed(model)
    return out


@pytest.mark.parametrize('arch,params_m', [('small', 23.8), ('base', 65.6)])
def test_equals_mmpretrain_tnt_with_its_weights(arch, params_m,
                                                mmpretrain_classifiers,
                                                tmp_path):
    """mmpretrain's whole ImageClassifier checkpoint loads through init_cfg
    (backbone. prefix, head ignored); logits equal to 1e-4."""
    ref = mmpretrain_classifiers[arch]
    path = str(tmp_path / f'mmpretrain_tnt_{arch}.pth')
    torch.save({'state_dict': ref.state_dict()}, path)
    ours = TNT(arch=arch, legacy=True, out_type='cls_token',
               init_cfg=dict(type='Pretrained', checkpoint=path))
    ours.init_weights()
    ours.eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected = ref(x, mode='tensor')
        got = ref.head.fc(ours(x)[0])
    assert (got - expected).abs().max() < 1e-4
    n = sum(p.numel() for p in ours.parameters()) + sum(
        p.numel() for p in ref.head.parameters())
    assert abs(n / 1e6 - params_m) <= 0.3, n


@pytest.fixture(scope='module')
def timm_tnt_s():
    import timm
    torch.manual_seed(0)
    return _perturbed(timm.create_model('tnt_s_patch16_224'), seed=1)


def test_timm_and_official_layouts_equal_timm(timm_tnt_s):
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected = timm_tnt_s(x)
    timm_state = timm_tnt_s.state_dict()
    official = tnt_official_from_timm(timm_state)
    assert detect_tnt_layout(timm_state) == 'timm'
    assert detect_tnt_layout(official) == 'official'
    for state in (timm_state, official):
        converted = tnt_any_to_mmvisattn(state)
        head = {k[5:]: converted.pop(k) for k in list(converted)
                if k.startswith('head.')}
        ours = TNT(arch='small', legacy=False, out_type='cls_token').eval()
        ours.load_state_dict(converted, strict=True)
        with torch.no_grad():
            logits = torch.nn.functional.linear(ours(x)[0], head['weight'],
                                                head['bias'])
        assert (logits - expected).abs().max() < 1e-4


def test_layout_mismatch_and_unknown_checkpoints_fail_clearly(
        timm_tnt_s, tmp_path):
    path = str(tmp_path / 'timm_tnt_s.pth')
    torch.save(timm_tnt_s.state_dict(), path)
    legacy = TNT(arch='small', legacy=True,
                 init_cfg=dict(type='Pretrained', checkpoint=path))
    with pytest.raises(ValueError, match='legacy=False'):
        legacy.init_weights()
    base = TNT(arch='base', init_cfg=dict(type='Pretrained', checkpoint=path))
    with pytest.raises(ValueError, match='shape mismatches'):
        base.init_weights()
    with pytest.raises(ValueError, match='not a TNT checkpoint'):
        detect_tnt_layout({'layers.0.blocks.0.attn.qkv.weight': None})


def test_pretrained_224_weights_at_another_size(timm_tnt_s, tmp_path):
    """A 224 checkpoint (14x14 sentence grid) loads into img_size=384 (its
    grid resized bicubically) and into a model without class token."""
    path = str(tmp_path / 'timm_tnt_s.pth')
    torch.save(timm_tnt_s.state_dict(), path)
    big = TNT(arch='small', img_size=384,
              init_cfg=dict(type='Pretrained', checkpoint=path))
    big.init_weights()
    assert big.sentence_pos.shape == (1, 1 + 24 * 24, 384)
    assert torch.equal(big.sentence_pos[:, 0], timm_tnt_s.patch_pos[:, 0])
    no_cls = TNT(arch='small', with_cls_token=False,
                 init_cfg=dict(type='Pretrained', checkpoint=path))
    no_cls.init_weights()
    assert no_cls.sentence_pos.shape == (1, 196, 384)
    assert torch.equal(no_cls.sentence_pos, timm_tnt_s.patch_pos[:, 1:])


# ----------------------------------------------------------------- pyramid
@pytest.fixture(scope='module')
def tnt_s():
    torch.manual_seed(0)
    model = TNT(arch='small', drop_path_rate=0.)
    model.init_weights()
    return model.eval()


@pytest.mark.parametrize('pyramid', ['simple', 'depths'])
@pytest.mark.parametrize('hw', [(224, 224), (230, 301), (64, 80), (33, 45),
                                (16, 16)])
def test_pyramid_strides_and_channels(tnt_s, pyramid, hw):
    model = tnt_s if pyramid == 'simple' else TNT(
        arch='small', pyramid='depths').eval()
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *hw))
    assert len(outs) == 4
    for out, stride, channels in zip(outs, (4, 8, 16, 32),
                                     (96, 192, 384, 384)):
        assert out.shape == (2, channels, -(-hw[0] // stride),
                             -(-hw[1] // stride)), (stride, out.shape)
        assert torch.isfinite(out).all()
    if pyramid == 'depths':
        assert model.pyramid_blocks == (2, 5, 8, 11)


def test_pyramid_options_and_dense_mode_without_class_token():
    model = TNT(arch='small', out_indices=(1, 3), out_channels=(64, 128, 256,
                                                                512),
                with_cls_token=False).eval()
    assert model.cls_token is None
    outs = model(torch.randn(1, 3, 96, 128))
    assert [tuple(o.shape[1:]) for o in outs] == [(128, 12, 16), (512, 3, 4)]
    with pytest.raises(ValueError, match='out_indices'):
        TNT(arch='small', out_indices=(4, ))
    with pytest.raises(ValueError, match='pyramid must be'):
        TNT(arch='small', pyramid='fpn')
    with pytest.raises(ValueError, match='arch'):
        TNT(arch='tiny')
    with pytest.raises(ValueError, match='images'):
        model(torch.randn(3, 64, 64))


def test_sentence_grid_of_the_pretraining_size_is_used_as_is(tnt_s):
    assert tnt_s._sentence_pos((14, 14)) is tnt_s.sentence_pos
    resized = tnt_s._sentence_pos((5, 7))
    assert resized.shape == (1, 1 + 35, 384)


def test_frozen_stages_and_checkpointing_keep_the_result():
    torch.manual_seed(0)
    frozen = TNT(arch='small', frozen_stages=2, drop_path_rate=0.)
    frozen.init_weights()
    frozen.train()
    assert not frozen.word_embed.weight.requires_grad
    assert not frozen.sentence_pos.requires_grad
    assert not any(p.requires_grad for p in frozen.blocks[1].parameters())
    assert all(p.requires_grad for p in frozen.blocks[2].parameters())
    assert not frozen.blocks[0].training and frozen.blocks[2].training
    cp_model = copy.deepcopy(frozen)
    cp_model.with_cp = True
    x = torch.randn(1, 3, 64, 64)
    a, b = frozen(x), cp_model(x)
    for u, v in zip(a, b):
        assert torch.allclose(u, v, atol=1e-5)
    sum(o.sum() for o in b).backward()
    assert cp_model.blocks[5].outer.attn.qkv.weight.grad is not None


# ------------------------------------------------------- optimizer, tools
def test_layer_decay_rules():
    from mmengine.optim import build_optim_wrapper

    from mmvisattn.engine import layer_id

    class Detector(torch.nn.Module):

        def __init__(self):
            super().__init__()
            self.backbone = TNT(arch='small', frozen_stages=0)
            self.neck = torch.nn.Conv2d(96, 8, 1)

    model = Detector()
    model.backbone.train()
    cfg = Config.fromfile(CASCADE)
    wrapper = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    groups = {id(p): g for g in wrapper.optimizer.param_groups
              for p in g['params']}
    base = cfg.optim_wrapper.optimizer.lr
    b = model.backbone

    def lr(p):
        return groups[id(p)]['lr']

    def wd(p):
        return groups[id(p)]['weight_decay']

    assert lr(b.blocks[11].outer.attn.qkv.weight) == pytest.approx(base *
                                                                   0.7)
    assert lr(b.blocks[0].inner.attn.qkv.weight) == pytest.approx(base *
                                                                  0.7**12)
    assert lr(b.pyramid_convs[0][0].weight) == pytest.approx(base)
    assert lr(model.neck.weight) == pytest.approx(base)
    assert wd(b.blocks[3].outer.mlp.fc2.weight) == 0.05
    assert b.norm is None  # unused by the pyramid: not built (DDP)
    for p in (b.blocks[3].outer.norm1.weight, b.pyramid_norms[0].weight):
        assert wd(p) == 0.
    assert layer_id('backbone.sentence_pos', 12) == 0
    assert layer_id('backbone.blocks.4.inner.norm1.weight', 12) == 5
    assert layer_id('roi_head.x', 12) == 13


@pytest.mark.slow
def test_converter_tool_reads_timm_and_mmpretrain(timm_tnt_s,
                                                  mmpretrain_classifiers,
                                                  tmp_path):
    sources = {
        'timm': (timm_tnt_s.state_dict(), False),
        'mmpretrain': ({'state_dict':
                        mmpretrain_classifiers['small'].state_dict()}, True)
    }
    for name, (state, legacy) in sources.items():
        src, dst = str(tmp_path / f'{name}.pth'), str(tmp_path / f'{name}_o.pth')
        torch.save(state, src)
        proc = subprocess.run(
            [sys.executable, 'tools/model_converters/tnt2mmvisattn.py', src,
             dst], cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f'{name} layout (legacy={legacy})' in proc.stdout
        saved = torch.load(dst)
        assert saved['meta']['legacy'] is legacy
        TNT(arch='small', legacy=legacy).load_state_dict(
            saved['state_dict'], strict=False)
        missing = set(TNT(arch='small', legacy=legacy).state_dict()) - set(
            saved['state_dict'])
        assert all(k.startswith('pyramid_') for k in missing), missing
    bad = str(tmp_path / 'bad.pth')
    torch.save({'foo.weight': torch.zeros(1)}, bad)
    proc = subprocess.run(
        [sys.executable, 'tools/model_converters/tnt2mmvisattn.py', bad,
         str(tmp_path / 'x.pth')], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0 and 'not a TNT checkpoint' in proc.stderr


def test_get_flops_prints_both_configs():
    tool = load_tool('tools/analysis_tools/get_flops.py')
    for path, params, flops in ((CASCADE, 82.06, 899.7),
                                (UPERNET, 53.92, 1103.4)):
        result = tool.count_config(path)
        assert abs(result['params'] / 1e6 - params) < 0.05, result['params']
        assert abs(result['flops'] / 1e9 - flops) < 1.0, result['flops']


# ------------------------------------------ detection and segmentation
@pytest.mark.slow
def test_cascade_mask_rcnn_tnt_s_loss_step_on_coco128(tmp_path):
    loss_step_on_coco128(CASCADE, tmp_path)


@pytest.mark.slow
def test_upernet_tnt_s_loss_step_on_camvid_ade(tmp_path):
    loss_step_on_camvid(UPERNET, tmp_path)
