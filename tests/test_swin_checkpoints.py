"""Swin checkpoints from every library load into ours and give their features.

Each reference model is built with its own library, saved the way that
library saves it, loaded through ``init_cfg=dict(type='Pretrained')`` (and
through ``tools/model_converters``) and compared on the same input.
(mmdet's and mmseg's whole-model checkpoints are also in test_swin.py.)
"""
import argparse
import copy
import inspect
import os.path as osp
import subprocess
import sys
from typing import Dict, NamedTuple

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.runner.checkpoint import (
    get_state_dict,
    save_checkpoint,
    weights_to_cpu,
)

from helpers import REPO, load_converter
from helpers.checkpoints import official_state_dict
from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.models.utils import (
    detect_swin_layout,
    extract_state_dict,
    is_official_swin,
    is_timm_swin,
    swin_timm_to_mmvisattn,
    swin_to_official,
)

CONVERTERS = osp.join(REPO, 'tools', 'model_converters')
TIMM_ARCH = 'swin_tiny_patch4_window7_224'


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    """Batch-1 Swin-T runs ~10x faster on one thread than on two busy ones."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _nontrivial(model, seed=0):
    """Noise on every parameter (biases too), so no mapping error can hide."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            big = p.ndim == 1 or 'relative_position' in name
            p.add_(torch.randn_like(p) * (0.1 if big else 0.02))
    model.eval()
    return model


def _load(path, **kwargs) -> SwinTransformer:
    """Ours (Swin-T), initialised from ``path`` like a config would."""
    model = SwinTransformer(
        arch='tiny', drop_path_rate=0.,
        init_cfg=dict(type='Pretrained', checkpoint=str(path)), **kwargs)
    model.init_weights()
    return model.eval()


def _assert_features(model, x, expected: Dict[int, torch.Tensor]):
    with torch.no_grad():
        outs = model(x)
    for index, want in expected.items():
        torch.testing.assert_close(outs[index], want, atol=1e-4, rtol=1e-4,
                                   msg=f'output {index}')


def _mmengine_save(state, path, **meta):
    """What mmengine's CheckpointHook writes (minus optimizer and hub)."""
    save_checkpoint({'meta': meta, 'state_dict': state}, str(path))
    return str(path)


class Source(NamedTuple):
    path: str
    layout: str  # what detect_swin_layout must say
    expected: Dict[int, torch.Tensor]  # our output index -> features


@pytest.fixture(scope='module')
def x():
    torch.manual_seed(1)
    return torch.randn(1, 3, 224, 224)


@pytest.fixture(scope='module')
def ours(x):
    model = _nontrivial(SwinTransformer(arch='tiny', drop_path_rate=0.))
    with torch.no_grad():
        return model, model(x)


@pytest.fixture(scope='module')
def timm_swin(x):
    import timm
    from timm.models.swin_transformer import SwinTransformer as TimmSwin
    if 'always_partition' not in inspect.signature(TimmSwin).parameters:
        pytest.skip(f'timm {timm.__version__} lacks always_partition')
    # Like the official model, timm neither shifts nor pads a map no larger
    # than a window (stage 4 at 224px: 7x7); detection backbones (mmdet's,
    # ours) always shift. always_partition=True is timm's switch for that,
    # as pad_small_map=True is mmpretrain's.
    model = _nontrivial(timm.create_model(TIMM_ARCH, pretrained=False,
                                          drop_path_rate=0.,
                                          always_partition=True))
    with torch.no_grad():  # timm 1.0: final-normed NHWC map
        features = model.forward_features(x).permute(0, 3, 1, 2)
    return model, {3: features}


@pytest.fixture(scope='module')
def mmpretrain_classifier(x):
    from mmpretrain.models import ImageClassifier
    model = ImageClassifier(
        backbone=dict(type='mmpretrain.SwinTransformer', arch='tiny',
                      drop_path_rate=0., pad_small_map=True),
        neck=dict(type='mmpretrain.GlobalAveragePooling'),
        head=dict(type='mmpretrain.LinearClsHead', num_classes=1000,
                  in_channels=768))
    _nontrivial(model)
    with torch.no_grad():  # a classifier outputs stage 4 only (norm3)
        return model, {3: model.backbone(x)[0]}


@pytest.fixture(scope='module')
def mmseg_swin(x):
    from mmseg.models.backbones import SwinTransformer as MMSegSwin
    model = _nontrivial(MMSegSwin(drop_path_rate=0.))
    with torch.no_grad():
        return model, dict(enumerate(model(x)))


def _official(tmp, ours, num_classes=1000):
    model, outs = ours
    path = str(tmp / f'official_{num_classes}.pth')
    torch.save({'model': official_state_dict(model, num_classes)}, path)
    return Source(path, 'official', {3: outs[3]})


def _timm_hub(tmp, timm_swin):
    """``pytorch_model.bin`` of a timm release on the Hugging Face hub."""
    model, expected = timm_swin
    path = str(tmp / 'pytorch_model.bin')
    torch.save(model.state_dict(), path)
    return Source(path, 'timm', expected)


def _timm_training(tmp, timm_swin):
    """What timm's train.py CheckpointSaver writes (without ``args``)."""
    model, expected = timm_swin
    path = str(tmp / 'timm_last.pth.tar')
    torch.save({'epoch': 3, 'arch': TIMM_ARCH, 'version': 2,
                'state_dict': model.state_dict(),
                'state_dict_ema': model.state_dict()}, path)
    return Source(path, 'timm', expected)


def _mmpretrain(tmp, mmpretrain_classifier):
    model, expected = mmpretrain_classifier
    path = _mmengine_save(weights_to_cpu(get_state_dict(model)),
                          tmp / 'mmpretrain_swin-t.pth',
                          mmpretrain_version='1.2.0')
    return Source(path, 'openmmlab', expected)


def mmcls0x_state(classifier_state):
    """An mmcls 0.x classifier: final norm ``norm`` and stored attn masks."""
    old = {}
    for key, value in classifier_state.items():
        old[key.replace('backbone.norm3.', 'backbone.norm.')] = value
    for stage, blocks in enumerate((2, 2, 6, 2)):
        windows = (56 // 2**stage // 7)**2
        for block in range(1, blocks, 2):  # shifted blocks held a mask
            old[f'backbone.stages.{stage}.blocks.{block}.attn.attn_mask'] = \
                torch.zeros(windows, 49, 49)
    return old


def _mmcls0x(tmp, mmpretrain_classifier):
    model, expected = mmpretrain_classifier
    state = mmcls0x_state(model.state_dict())
    path = _mmengine_save(state, tmp / 'mmcls0x_swin-t.pth',
                          mmcls_version='0.25.0')
    return Source(path, 'openmmlab', expected)


def _mmseg(tmp, mmseg_swin):
    model, expected = mmseg_swin
    state = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    state['decode_head.conv_seg.weight'] = torch.zeros(150, 512, 1, 1)
    path = _mmengine_save(state, tmp / 'upernet_swin-t.pth',
                          mmseg_version='1.2.2')
    return Source(path, 'openmmlab', expected)


def _our_detector(tmp, ours):
    """Ours is the release layout (with the detection release's norm{i})."""
    model, outs = ours
    state = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    state['neck.lateral_convs.0.conv.weight'] = torch.zeros(256, 96, 1, 1)
    path = _mmengine_save(state, tmp / 'cascade_swin-t.pth')
    return Source(path, 'official', dict(enumerate(outs)))


# name -> (builder, the fixture holding its reference model)
SOURCES = {
    'official': (_official, 'ours'),
    'official_22k': (lambda tmp, o: _official(tmp, o, 21841), 'ours'),
    'timm_hub': (_timm_hub, 'timm_swin'),
    'timm_training': (_timm_training, 'timm_swin'),
    'mmpretrain_classifier': (_mmpretrain, 'mmpretrain_classifier'),
    'mmcls0x_classifier': (_mmcls0x, 'mmpretrain_classifier'),
    'mmseg_segmentor': (_mmseg, 'mmseg_swin'),
    'mmvisattn_detector': (_our_detector, 'ours'),
}


@pytest.fixture(scope='module')
def sources(request, tmp_path_factory):
    """``sources(name)``: that checkpoint, saved once per module."""
    tmp = tmp_path_factory.mktemp('swin_sources')
    made = {}

    def get(name):
        if name not in made:
            build, reference = SOURCES[name]
            made[name] = build(tmp, request.getfixturevalue(reference))
        return made[name]

    return get


@pytest.mark.parametrize('name', list(SOURCES))
def test_checkpoint_loads_with_same_features(sources, x, name):
    source = sources(name)
    state = extract_state_dict(torch.load(source.path, weights_only=False))
    assert detect_swin_layout(state) == source.layout
    _assert_features(_load(source.path), x, source.expected)


def test_timm_own_filter_inverts_our_conversion(timm_swin):
    """timm's ``checkpoint_filter_fn`` (official release -> timm) undoes
    timm -> ours -> official exactly: same keys, same tensors, no reorder."""
    from timm.models.swin_transformer import checkpoint_filter_fn
    model, _ = timm_swin
    state = model.state_dict()
    assert 'layers.0.downsample.reduction.weight' not in state  # premise
    assert 'layers.3.downsample.reduction.weight' in state
    official = swin_to_official(swin_timm_to_mmvisattn(state))
    official['head.weight'] = state['head.fc.weight']  # official head name
    official['head.bias'] = state['head.fc.bias']
    back = checkpoint_filter_fn(official, model)
    assert sorted(back) == sorted(state)
    for key, value in state.items():
        assert torch.equal(back[key], value), key


def test_official_and_timm_told_apart_by_structure(sources):
    official = extract_state_dict(
        torch.load(sources('official').path, weights_only=False))
    timm_state = extract_state_dict(
        torch.load(sources('timm_hub').path, weights_only=False))
    # headless checkpoints: only where the merging sits tells them apart
    for state, layout in ((official, 'official'), (timm_state, 'timm')):
        headless = {k: v for k, v in state.items()
                    if not k.startswith('head.')}
        assert detect_swin_layout(headless) == layout
    assert not is_official_swin(timm_state) and not is_timm_swin(official)
    # a one-stage model has no merging at all: timm's ``head.fc`` decides
    one_stage = {'layers.0.blocks.0.mlp.fc1.weight': torch.zeros(1)}
    assert detect_swin_layout(one_stage) == 'official'
    assert detect_swin_layout({**one_stage,
                               'head.fc.weight': torch.zeros(1)}) == 'timm'


def test_unknown_layout_is_refused_with_its_keys():
    resnet = {'conv1.weight': torch.zeros(1), 'bn1.weight': torch.zeros(1),
              'fc.weight': torch.zeros(1)}
    with pytest.raises(ValueError, match=r'not a Swin.*conv1\.weight, '
                       r'bn1\.weight, fc\.weight'):
        detect_swin_layout(resnet)


def test_mmcls0x_keys_are_what_mmpretrain_calls_legacy(mmpretrain_classifier,
                                                      x):
    """Our stand-in for an mmcls 0.x file is one mmpretrain itself reads:
    ``norm`` and ``attn_mask`` are the legacy names it converts/drops."""
    model, expected = mmpretrain_classifier
    old = mmcls0x_state(model.state_dict())
    backbone = copy.deepcopy(model.backbone)
    with torch.no_grad():
        for p in backbone.parameters():
            p.zero_()
    backbone.load_state_dict(
        {k[len('backbone.'):]: v for k, v in old.items()
         if k.startswith('backbone.')})  # strict: every key is accounted for
    with torch.no_grad():
        torch.testing.assert_close(backbone(x)[0], expected[3])


def test_22k_head_is_dropped(sources, ours):
    path = sources('official_22k').path
    assert torch.load(path)['model']['head.weight'].shape == (21841, 768)
    loaded = _load(path).state_dict()
    assert not any(k.startswith('head') for k in loaded)
    for key, value in ours[0].state_dict().items():
        if not key.startswith(('norm0', 'norm1', 'norm2')):
            torch.testing.assert_close(loaded[key], value, msg=key)


@pytest.fixture(scope='module')
def window12_official(tmp_path_factory):
    """A window-12 (384px) 22K release: 23x23 tables, 21841 classes."""
    model = _nontrivial(
        SwinTransformer(arch='tiny', window_size=12, drop_path_rate=0.))
    state = official_state_dict(model, num_classes=21841)
    assert state['layers.0.blocks.0.attn.relative_position_bias_table'] \
        .shape == (23 * 23, 3)
    path = tmp_path_factory.mktemp('w12') / 'swin_tiny_window12_22k.pth'
    torch.save({'model': state}, path)
    return model, str(path)


def test_window12_checkpoint_into_window12_is_exact(window12_official):
    source, path = window12_official
    loaded = _load(path, window_size=12)
    x = torch.randn(1, 3, 192, 192)  # stage 4 (6x6) is padded to a window
    with torch.no_grad():
        want = source(x)[3]
    _assert_features(loaded, x, {3: want})


def test_window12_checkpoint_into_window7_is_resized(window12_official):
    _, path = window12_official
    model = _load(path, window_size=7)
    table = model.layers[2].blocks[0].attn.relative_position_bias_table
    assert table.shape == (13 * 13, 12)
    out = model(torch.randn(1, 3, 64, 64))[3]
    assert out.shape == (1, 768, 2, 2) and torch.isfinite(out).all()


# --------------------------------------------------------------- converters
def _run(script, *args):
    return subprocess.run(
        [sys.executable, osp.join(CONVERTERS, script), *map(str, args)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=300)


@pytest.mark.parametrize('name', list(SOURCES))
def test_swin2mmvisattn_every_layout(sources, x, name, tmp_path, monkeypatch,
                                     capsys):
    source = sources(name)
    dst = tmp_path / 'converted.pth'
    load_converter('swin2mmvisattn', monkeypatch).main([source.path, str(dst)])
    printed = capsys.readouterr().out
    saved = torch.load(dst)
    assert saved['meta']['source_layout'] == source.layout
    assert f'{source.layout} layout' in printed
    assert f'{len(saved["state_dict"])} tensors' in printed
    assert detect_swin_layout(saved['state_dict']) == 'official'
    _assert_features(_load(dst), x, source.expected)


def test_swin2mmvisattn_reads_timm_safetensors(timm_swin, x, tmp_path,
                                               monkeypatch):
    """timm's Hugging Face releases ship ``model.safetensors``."""
    import safetensors.torch as safetensors_torch
    model, expected = timm_swin
    src = tmp_path / 'model.safetensors'
    safetensors_torch.save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()}, str(src))
    dst = tmp_path / 'converted.pth'
    load_converter('swin2mmvisattn', monkeypatch).main([str(src), str(dst)])
    _assert_features(_load(dst), x, expected)


def test_timm_training_checkpoint_with_args_needs_trust(timm_swin, x,
                                                        tmp_path,
                                                        monkeypatch):
    """timm's train.py also pickles its argparse.Namespace, which the safe
    loader refuses; --trust-file is the explicit way past it."""
    model, expected = timm_swin
    src = tmp_path / 'model_best.pth.tar'
    torch.save({'epoch': 3, 'arch': TIMM_ARCH,
                'state_dict': model.state_dict(),
                'args': argparse.Namespace(model=TIMM_ARCH, lr=1e-3)}, src)
    dst = tmp_path / 'converted.pth'
    converter = load_converter('swin2mmvisattn', monkeypatch)
    with pytest.raises(SystemExit, match='cannot read .*model_best.pth.tar'):
        converter.main([str(src), str(dst)])
    converter.main([str(src), str(dst), '--trust-file'])
    _assert_features(_load(dst), x, expected)


@pytest.mark.slow
def test_swin2mmvisattn_script_end_to_end(sources, x, tmp_path):
    source = sources('timm_hub')
    dst = tmp_path / 'swin_t_from_timm.pth'
    proc = _run('swin2mmvisattn.py', source.path, dst)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'timm layout' in proc.stdout
    num = len(torch.load(dst)['state_dict'])
    assert f'{num} tensors' in proc.stdout
    _assert_features(_load(dst), x, source.expected)


@pytest.mark.slow
def test_swin2mmvisattn_refuses_a_non_swin_file(tmp_path):
    src = tmp_path / 'resnet50.pth'
    torch.save({'state_dict': {'conv1.weight': torch.zeros(64, 3, 7, 7),
                               'bn1.weight': torch.zeros(64)}}, src)
    proc = _run('swin2mmvisattn.py', src, tmp_path / 'out.pth')
    assert proc.returncode != 0
    assert 'Traceback' not in proc.stderr, proc.stderr
    assert str(src) in proc.stderr and 'not a Swin checkpoint' in proc.stderr
    assert 'conv1.weight' in proc.stderr and 'bn1.weight' in proc.stderr
    assert not (tmp_path / 'out.pth').exists()


@pytest.mark.slow
def test_mmvisattn2official_script(sources, x, tmp_path):
    source = sources('mmvisattn_detector')
    dst = tmp_path / 'official.pth'
    proc = _run('mmvisattn2official.py', source.path, dst)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = torch.load(dst)['model']
    assert detect_swin_layout(state) == 'official'
    assert 'norm.weight' in state and 'norm0.weight' not in state
    _assert_features(_load(dst), x, {3: source.expected[3]})


@pytest.mark.slow
def test_mmvisattn2official_to_mmdet_loads_in_mmdet(sources, x, tmp_path):
    """mmdet's own Pretrained loading reads the file and matches ours."""
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    source = sources('mmvisattn_detector')
    dst = tmp_path / 'mmdet.pth'
    proc = _run('mmvisattn2official.py', source.path, dst, '--to', 'mmdet')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'mmdet layout' in proc.stdout
    # mmdet reads init_cfg.checkpoint: a config's ConfigDict, not a dict
    mmdet_swin = MMDetSwin(drop_path_rate=0.,
                           init_cfg=ConfigDict(type='Pretrained',
                                               checkpoint=str(dst)))
    mmdet_swin.init_weights()
    mmdet_swin.eval()
    with torch.no_grad():
        for index, got in enumerate(mmdet_swin(x)):
            torch.testing.assert_close(got, source.expected[index],
                                       atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('window_size, window', [(12, (12, 12)),
                                                 ((8, 12), (8, 12))],
                         ids=['window12', 'window8x12'])
def test_window7_tables_resize_as_timm_bicubic(tmp_path, window_size,
                                               window):
    """A window-7 file into a window-12 or a rectangular 8 x 12 model:
    every bias table is the bicubic resize of the authors' fine-tuning
    code, equal to timm's ``resize_rel_pos_bias_table_simple`` (timm's own
    Swin filter uses its geometric-progression resize instead, a different
    interpolation)."""
    timm_layers = pytest.importorskip('timm.layers')
    arch = dict(embed_dims=32, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8),
                drop_path_rate=0.)
    source = _nontrivial(SwinTransformer(window_size=7, **arch))
    path = tmp_path / 'w7.pth'
    torch.save({'model': official_state_dict(source)}, path)
    model = SwinTransformer(window_size=window_size, init_cfg=dict(
        type='Pretrained', checkpoint=str(path)), **arch)
    model.init_weights()
    tables = {k: v for k, v in source.state_dict().items()
              if k.endswith('relative_position_bias_table')}
    assert len(tables) == 8
    rows = (2 * window[0] - 1) * (2 * window[1] - 1)
    for key, table in tables.items():
        want = timm_layers.resize_rel_pos_bias_table_simple(
            table, new_window_size=window,
            new_bias_shape=(rows, table.shape[1]))
        torch.testing.assert_close(model.state_dict()[key], want, rtol=0,
                                   atol=0, msg=key)


def test_rectangular_windows_equal_timm(tmp_path):
    """(8, 12) windows, shifted by (4, 6): timm's SwinTransformer with the
    same window (``always_partition=True``: every map partitioned and
    shifted, as detection backbones do) and ours agree on its weights, at
    256 x 384, where every stage's map is whole windows (timm shifts
    before padding, the official detection code after)."""
    timm = pytest.importorskip('timm')
    from timm.models.swin_transformer import SwinTransformer as TimmSwin
    if 'always_partition' not in inspect.signature(TimmSwin).parameters:
        pytest.skip(f'timm {timm.__version__} lacks always_partition')
    arch = dict(depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8))
    reference = _nontrivial(TimmSwin(
        img_size=(256, 384), window_size=(8, 12), embed_dim=32,
        num_classes=0, drop_path_rate=0., always_partition=True, **arch))
    path = tmp_path / 'timm_w8x12.pth'
    torch.save(reference.state_dict(), path)
    model = SwinTransformer(embed_dims=32, window_size=(8, 12),
                            drop_path_rate=0., init_cfg=dict(
                                type='Pretrained', checkpoint=str(path)),
                            **arch)
    model.init_weights()
    model.eval()
    assert model.layers[3].blocks[1].attn.window_tokens == 96
    x = torch.randn(1, 3, 256, 384)
    with torch.no_grad():
        want = reference.forward_features(x).permute(0, 3, 1, 2)
        got = model(x)[3]
    assert got.shape == (1, 256, 8, 12)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
