"""ImageNet classification through mmpretrain with our backbones: the
recipes (Swin paper Table 1, TNT paper), params/FLOPs, a short real run on
hymenoptera_mini through tools/train.py + tools/test.py, and the classifier
checkpoint initialising a detector's backbone."""
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config

import mmvisattn
from helpers import (
    REPO,
    convert_with,
    load_tool,
    run_tools,
    runner_loss_step,
    shared_dataset,
)

CONFIGS = osp.join(REPO, 'configs')
# The classifier family's run through tools/train.py + tools/test.py; the
# other backbones take one loss step on what the Runner builds.
END_TO_END = ('swin-t', 'swin/swin-t-p4-w7_16xb64_300e_in1k.py')
LOSS_STEPS = {
    'tnt-s': 'tnt/tnt-s-p16_16xb64_300e_in1k.py',
    'rswatt-t': 'rswatt/rswatt-t_16xb64_300e_in1k.py',
}
CASCADE_SWIN_T = osp.join(
    CONFIGS, 'swin',
    'cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco.py')


def cfg(rel):
    return Config.fromfile(osp.join(CONFIGS, rel))


def test_swin_recipes_follow_the_release():
    """The authors' release (microsoft/Swin-Transformer configs/swin/*.yaml,
    config.py, main.py's lr x batch / 512), per config; every value with its
    source is in tests/test_recipes.py."""
    t = cfg('swin/swin-t-p4-w7_16xb64_300e_in1k.py')
    assert t.default_scope == 'mmpretrain'
    assert t.model.backbone.type == 'mmvisattn.SwinTransformer'
    assert t.train_cfg.max_epochs == 300
    assert t.optim_wrapper.optimizer.type == 'AdamW'
    assert t.optim_wrapper.optimizer.lr == 1e-3
    assert t.optim_wrapper.optimizer.weight_decay == 0.05
    assert t.auto_scale_lr.base_batch_size == 1024 == \
        16 * t.train_dataloader.batch_size
    warm, cos = t.param_scheduler
    assert (warm.type, warm.end, cos.type) == ('LinearLR', 20,
                                                'CosineAnnealingLR')
    steps = [s.type for s in t.train_dataloader.dataset.pipeline]
    assert 'RandAugment' in steps and 'RandomErasing' in steps
    assert [a.type for a in t.model.train_cfg.augments] == ['Mixup', 'CutMix']
    assert t.model.head.loss.type == 'LabelSmoothLoss'
    assert t.train_dataloader.sampler.type == 'DefaultSampler'  # no repeat
    assert 'ema' not in str(t.get('custom_hooks', [])).lower()
    assert t.train_dataloader.dataset.data_root == 'data/imagenet'
    for arch, dp in (('small', 0.3), ('base', 0.5)):
        c = cfg(f'swin/swin-{arch[0]}-p4-w7_16xb64_300e_in1k.py')
        assert (c.model.backbone.arch, c.model.backbone.drop_path_rate) == \
            (arch, dp)
    assert t.model.backbone.drop_path_rate == 0.2

    pre = cfg('swin/swin-l-p4-w7_64xb64_90e_in22k.py')
    assert pre.train_cfg.max_epochs == 90
    assert pre.optim_wrapper.optimizer.weight_decay == 0.05
    assert pre.auto_scale_lr.base_batch_size == 4096 == \
        64 * pre.train_dataloader.batch_size
    assert pre.model.head.num_classes == 21841
    warm, decay = pre.param_scheduler
    assert (warm.end, decay.type, decay.eta_min) == (5, 'CosineAnnealingLR',
                                                     1e-5)

    for rel, window, size in [
        ('swin/swin-b-p4-w7_in22k-pre_16xb64_30e_in1k.py', 7, 224),
        ('swin/swin-b-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py', 12, 384),
        ('swin/swin-l-p4-w12_in22k-pre_16xb64_30e_in1k-384px.py', 12, 384),
        ('swin/swin-b-p4-w12_16xb64_30e_in1k-384px.py', 12, 384),
    ]:
        c = cfg(rel)
        assert c.train_cfg.max_epochs == 30
        assert c.optim_wrapper.optimizer.lr == 4e-5
        assert c.optim_wrapper.optimizer.weight_decay == 1e-8
        assert [(s.type, s.end) for s in c.param_scheduler] == [
            ('LinearLR', 5), ('CosineAnnealingLR', 30)]
        assert c.model.backbone.get('window_size', 7) == window
        assert c.model.backbone.init_cfg.prefix == 'backbone.'
        crop = [s for s in c.train_dataloader.dataset.pipeline
                if s.type == 'RandomResizedCrop'][0]
        assert crop.scale == size


def test_tnt_and_rswatt_recipes():
    s = cfg('tnt/tnt-s-p16_16xb64_300e_in1k.py')
    assert s.model.backbone.type == 'mmvisattn.TNT'
    assert s.model.backbone.out_type == 'cls_token'
    assert s.model.backbone.drop_path_rate == 0.1
    assert s.train_dataloader.sampler.type == 'RepeatAugSampler'
    assert s.param_scheduler[0].end == 5
    assert s.data_preprocessor.mean == [127.5] * 3
    b = cfg('tnt/tnt-b-p16_16xb64_300e_in1k.py')
    assert (b.model.backbone.arch, b.model.head.in_channels) == ('base', 640)
    r = cfg('rswatt/rswatt-t_16xb64_300e_in1k.py')
    assert r.model.backbone.type == 'mmvisattn.RSWAttTransformer'
    assert r.train_cfg.max_epochs == 300


@pytest.mark.parametrize('rel,params,flops', [
    ('swin/swin-t-p4-w7_16xb64_300e_in1k.py', 28.29, 4.5),
    ('swin/swin-b-p4-w12_16xb64_30e_in1k-384px.py', 87.9, 47.1),
    ('tnt/tnt-s-p16_16xb64_300e_in1k.py', 23.77, 5.2),
])
def test_params_and_flops_at_the_test_input(rel, params, flops):
    """The full Table 1 comparison is `get_flops.py --table1`
    (configs/swin/README.md); here a 224 Swin, the 384 window-12 Swin and
    TNT-S, pinned."""
    get_flops = load_tool('tools/analysis_tools/get_flops.py')
    r = get_flops.count_config(osp.join(CONFIGS, rel))
    assert r['params'] / 1e6 == pytest.approx(params, abs=0.01)
    assert r['flops'] / 1e9 == pytest.approx(flops, abs=0.05)


def hymenoptera_config(folder, rel, root, size=112):
    """The config's recipe (augmentation, mixup/cutmix, optimizer) on the
    2-class ImageFolder data, at a CPU-sized crop."""
    path = osp.join(folder, osp.basename(rel))
    with open(path, 'w') as f:
        f.write(f'''
_base_ = {osp.join(CONFIGS, rel)!r}
data_preprocessor = dict(num_classes=2)
model = dict(head=dict(num_classes=2))
# At a CPU-sized crop Swin's stage 4 is smaller than a window, which the
# classifiers' semantics (pad_small_map=False) refuse: pad it here.
if 'SwinTransformer' in _base_.model.backbone.type:
    model['backbone'] = dict(pad_small_map=True)
train_pipeline = [
    dict(step, scale={size}) if step['type'] == 'RandomResizedCrop' else step
    for step in _base_.train_pipeline
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale={size * 8 // 7}, edge='short',
         backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size={size}),
    dict(type='PackInputs'),
]
# ImageFolder layout: class folders under train/ and val/
train_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root={root!r},
                 data_prefix='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root={root!r},
                 data_prefix='val', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1, val_interval=1)
# the recipe's warm-up + cosine, squeezed into the one epoch
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=0.5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=0.5,
         end=1, convert_to_iter_based=True)
]
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
''')
    return path


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """Swin-T trained 1 epoch on hymenoptera_mini, then tested: (checkpoint,
    training output, test output)."""
    root = shared_dataset('hymenoptera_mini')
    folder = str(tmp_path_factory.mktemp('cls'))
    config = hymenoptera_config(folder, END_TO_END[1], root)
    work = osp.join(folder, END_TO_END[0])
    ckpt = osp.join(work, 'epoch_1.pth')
    train, test = run_tools(['tools/train.py', config, '--work-dir', work],
                            ['tools/test.py', config, ckpt, '--work-dir',
                             work])
    return ckpt, train, test


@pytest.mark.slow
def test_hymenoptera_train_then_test_prints_top1(trained):
    _, train, test = trained
    # one epoch of 50 images in batches of 8, then validation on 30
    assert re.search(r'Epoch\(train\)\s+\[1\]\[7/7\]', train)
    assert re.search(r'Epoch\(val\) \[1\]\[4/4\]\s+accuracy/top1: [\d.]+',
                     train), train[-3000:]
    top1 = re.search(r'Epoch\(test\) \[4/4\]\s+accuracy/top1: ([\d.]+)',
                     test)
    assert top1, test[-3000:]
    assert 0.0 <= float(top1.group(1)) <= 100.0
    print(f'{END_TO_END[0]}: top-1 {top1.group(1)} on hymenoptera_mini val')


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(LOSS_STEPS))
def test_hymenoptera_loss_step(name, tmp_path):
    config = hymenoptera_config(str(tmp_path), LOSS_STEPS[name],
                                shared_dataset('hymenoptera_mini'))
    step = runner_loss_step(config, tmp_path / 'work',
                            moves=('backbone.', 'head.'))
    assert set(step.losses) == {'loss'}, step.losses


@pytest.mark.slow
def test_swin_classifier_checkpoint_initialises_cascade_backbone(trained):
    """Classification weights go into the detector with the config's
    Pretrained init (prefix ``backbone.``), no conversion: every backbone
    tensor comes from the checkpoint except the output norms of stages 1-3,
    which only a pyramid has (the classifier normalises stage 4 alone)."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    ckpt_path = trained[0]
    config = Config.fromfile(CASCADE_SWIN_T)
    config.model.backbone.init_cfg = dict(
        type='Pretrained', checkpoint=ckpt_path, prefix='backbone.')
    detector = MODELS.build(config.model)
    detector.init_weights()
    with mmvisattn.runtime():  # a whole mmengine checkpoint
        trained = torch.load(ckpt_path)['state_dict']
    source = {k[len('backbone.'):]: v for k, v in trained.items()
              if k.startswith('backbone.')}
    own = detector.backbone.state_dict()
    missing = sorted(set(own) - set(source))
    assert missing == [f'norm{i}.{p}' for i in range(3)
                       for p in ('bias', 'weight')]
    assert not set(source) - set(own)  # nothing of the classifier dropped
    for key, value in source.items():
        assert torch.equal(own[key], value), key


@pytest.mark.parametrize('rel,timm_name', [
    ('swin/swin-t-p4-w7_16xb64_300e_in1k.py', 'swin_tiny_patch4_window7_224'),
    ('swin/swin-b-p4-w12_16xb64_30e_in1k-384px.py',
     'swin_base_patch4_window12_384'),
])
def test_official_classifier_weights_give_timms_logits(rel, timm_name,
                                                       tmp_path):
    """An official-layout release ({'model': ...}, head.weight) loaded into
    our classification config gives the logits of timm's model with the
    same weights: the configs use the classifiers' semantics
    (pad_small_map=False), so the one-window stage 4 is not shifted."""
    timm = pytest.importorskip('timm')
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS

    from mmvisattn.models.utils import swin_any_to_mmvisattn, swin_to_official
    torch.manual_seed(0)
    reference = timm.create_model(timm_name, pretrained=False).eval()
    with torch.no_grad():  # the relative tables start at zero in timm
        for name, p in reference.named_parameters():
            if 'relative_position_bias_table' in name:
                p.normal_(0, 0.5)
    state = reference.state_dict()
    release = swin_to_official(swin_any_to_mmvisattn(
        {k: v for k, v in state.items() if not k.startswith('head.')}, 4))
    release['head.weight'] = state['head.fc.weight']
    release['head.bias'] = state['head.fc.bias']
    path = str(tmp_path / 'release.pth')
    torch.save({'model': release}, path)

    config = cfg(rel)
    model_cfg = config.model
    model_cfg.pop('train_cfg', None)
    model_cfg.backbone.init_cfg = dict(type='Pretrained', checkpoint=path)
    model_cfg.head.pop('init_cfg', None)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        ours = MODELS.build(model_cfg)
    ours.init_weights()
    with torch.no_grad():
        ours.head.fc.weight.copy_(release['head.weight'])
        ours.head.fc.bias.copy_(release['head.bias'])
    ours.eval()
    assert ours.backbone.pad_small_map is False
    size = reference.default_cfg['input_size'][-1]
    x = torch.randn(1, 3, size, size)
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mode='tensor'), reference(x),
                                   atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_whole_classifier_converts_back_to_mmpretrain_and_official(tmp_path):
    """The way back for a classifier of ours: to mmpretrain's layout it loads
    into mmpretrain's own Swin-T classifier and gives our logits; to the
    official release layout, timm's own ``checkpoint_filter_fn`` (which
    reads official releases) loads it into timm's model, same logits."""
    timm = pytest.importorskip('timm')
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    model_cfg = cfg('swin/swin-t-p4-w7_16xb64_300e_in1k.py').model
    model_cfg.pop('train_cfg', None)
    model_cfg.head.pop('init_cfg', None)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        ours = MODELS.build(model_cfg)
        ours.init_weights()
        with torch.no_grad():
            for name, p in ours.named_parameters():
                if 'relative_position_bias_table' in name or 'bias' in name:
                    p.normal_(0, 0.1)
        ours.eval()
        import mmpretrain
        peer_cfg = Config.fromfile(osp.join(
            osp.dirname(mmpretrain.__file__), '.mim', 'configs',
            'swin_transformer', 'swin-tiny_16xb64_in1k.py')).model
        peer_cfg.pop('train_cfg', None)
        peer = MODELS.build(peer_cfg)
    src = str(tmp_path / 'ours.pth')
    torch.save({'state_dict': ours.state_dict(), 'meta': {}}, src)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        logits = ours(x, mode='tensor')

    def convert(to):
        dst = str(tmp_path / f'{to}.pth')
        convert_with('mmvisattn2official.py', src, dst, '--to', to,
                 '--keep-heads')
        return torch.load(dst, weights_only=True)

    result = peer.load_state_dict(convert('mmpretrain')['state_dict'],
                                  strict=False)
    assert not result.unexpected_keys, result
    assert all(k.endswith('relative_position_index')
               for k in result.missing_keys), result
    peer.eval()
    with torch.no_grad():
        torch.testing.assert_close(peer(x, mode='tensor'), logits,
                                   atol=1e-4, rtol=1e-4)

    from timm.models.swin_transformer import checkpoint_filter_fn
    reference = timm.create_model('swin_tiny_patch4_window7_224',
                                  pretrained=False).eval()
    official = convert('official')['model']
    assert 'head.weight' in official and 'norm.weight' in official
    reference.load_state_dict(checkpoint_filter_fn(official, reference))
    with torch.no_grad():
        torch.testing.assert_close(reference(x), logits, atol=1e-4,
                                   rtol=1e-4)
