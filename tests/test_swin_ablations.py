"""The Swin paper's ablations as ready configs (configs/swin/ablations/):
each is its main config (ImageNet-1K Swin-T, Cascade Mask R-CNN Swin-T 3x,
UperNet Swin-T) with one backbone switch, the detection/segmentation ones
starting from the ImageNet model of the same ablation; the built backbone
is the variant the name says; the metafile carries the paper's numbers,
which each config's header quotes. (Every one of them is also built with
its optimizer by tests/test_recipes.py.)
"""
import copy
import glob
import os.path as osp
import re

import pytest
import torch
import yaml
from mmengine.config import Config

from helpers import REPO, sampled

ABLATIONS = osp.join(REPO, 'configs', 'swin', 'ablations')
CONFIGS = sorted(osp.basename(p)
                 for p in glob.glob(osp.join(ABLATIONS, '*.py')))
# name tag -> the backbone keys it sets (Tables 4, 5 and 6)
SWITCHES = {
    'noshift': dict(attn_cfg=dict(type='WindowAttention', shift_mode='none')),
    'nopos': dict(attn_cfg=dict(type='WindowAttention',
                                relative_position=False)),
    'abspos': dict(use_abs_pos_embed=True, attn_cfg=dict(
        type='WindowAttention', relative_position=False)),
    'absrelpos': dict(use_abs_pos_embed=True),
    'relpos-noapp': dict(attn_cfg=dict(type='WindowAttention',
                                       use_content=False)),
    'sliding': dict(attn_cfg=dict(type='HaloSlidingWindowAttention')),
    'performer': dict(use_abs_pos_embed=True,
                      attn_cfg=dict(type='PerformerAttention')),
    'padding': dict(attn_cfg=dict(type='WindowAttention',
                                  shift_mode='padding')),
}
TAG = re.compile(r'swin-t-p4-w7-([a-z-]+?)_')


def _tag(name):
    return TAG.search(name).group(1)


def _classification_config(name):
    tag = _tag(name)
    return f'swin-t-p4-w7-{tag}_16xb64_300e_in1k.py'


def test_every_ablation_is_there():
    """Table 4's five rows on the three tasks, sliding windows (Table 6) and
    padding (Table 5) on the three tasks, Performer on ImageNet (the paper
    has no detection/segmentation result for it)."""
    tags = {}
    for name in CONFIGS:
        tags.setdefault(_tag(name), set()).add(name.split('_')[0])
    assert set(tags) == set(SWITCHES)
    for tag, tasks in tags.items():
        want = {'swin-t-p4-w7-' + tag} | (
            set() if tag == 'performer' else
            {'cascade-mask-rcnn', 'upernet'})
        assert tasks == want, (tag, tasks)


# the UperNet ablations in the fast tier, the Cascade Mask R-CNN ones (the
# same switches on a larger model) in the slow one
@pytest.mark.parametrize(
    'name', sampled(CONFIGS, lambda n: n.startswith('upernet')))
def test_ablation_is_the_main_config_with_one_switch(name):
    cfg = Config.fromfile(osp.join(ABLATIONS, name))
    with open(osp.join(ABLATIONS, name)) as f:
        base = re.search(r"_base_ = '\.\./(.+?)'", f.read()).group(1)
    main = Config.fromfile(osp.join(REPO, 'configs', 'swin', base))
    got, want = cfg.to_dict(), main.to_dict()
    backbone, main_backbone = (got['model'].pop('backbone'),
                               want['model'].pop('backbone'))
    got.pop('pretrained', None)
    want.pop('pretrained', None)
    assert got == want  # nothing but the backbone differs
    switch = SWITCHES[_tag(name)]
    expected = dict(main_backbone, **switch)
    if not name.startswith('swin-t'):
        # starts from the ImageNet model of the same ablation, which the
        # classification config of that ablation writes
        cls = _classification_config(name)
        assert osp.isfile(osp.join(ABLATIONS, cls)), cls
        expected['init_cfg'] = dict(
            type='Pretrained',
            checkpoint=f'work_dirs/{cls[:-3]}/epoch_300.pth')
        cls_cfg = Config.fromfile(osp.join(ABLATIONS, cls))
        assert cls_cfg.train_cfg.max_epochs == 300
        assert cls_cfg.default_hooks.checkpoint.interval == 1
    assert backbone == expected


@pytest.fixture(scope='module')
def built():
    """One backbone per switch, built from the classification config."""
    import mmvisattn  # noqa: F401
    from mmvisattn.registry import MODELS
    models = {}
    for tag in SWITCHES:
        cfg = Config.fromfile(osp.join(
            ABLATIONS, f'swin-t-p4-w7-{tag}_16xb64_300e_in1k.py'))
        backbone = copy.deepcopy(cfg.model.backbone.to_dict())
        backbone['type'] = backbone['type'].replace('mmvisattn.', '')
        torch.manual_seed(0)
        models[tag] = MODELS.build(backbone).eval()
    return models


def _params(model):
    return {n.split('.')[-1] for n, _ in model.named_parameters()}


def test_built_backbones_are_the_variants(built):
    blocks = {tag: [b for layer in m.layers for b in layer.blocks]
              for tag, m in built.items()}
    # the blocks keep their shift sizes; the attention ignores them
    assert all(b.attn.shift_mode == 'none' for b in blocks['noshift'])
    assert any(b.shift_size for b in blocks['padding'])
    assert all(b.attn.shift_mode == 'padding' for b in blocks['padding'])
    assert all(not b.attn.use_content for b in blocks['relpos-noapp'])
    assert {type(b.attn).__name__ for b in blocks['sliding']} == {
        'HaloSlidingWindowAttention'}
    assert {type(b.attn).__name__ for b in blocks['performer']} == {
        'PerformerAttention'}
    table, absolute = 'relative_position_bias_table', 'absolute_pos_embed'
    assert table not in _params(built['nopos'])
    assert absolute not in _params(built['nopos'])
    assert {table, absolute} <= _params(built['absrelpos'])
    assert absolute in _params(built['abspos'])
    assert table not in _params(built['abspos'])
    assert table in _params(built['noshift'])
    # every one runs at the classification size and gives the pyramid
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        for tag, model in built.items():
            out = model(x)
            assert [tuple(o.shape[1:]) for o in out][-1] == (768, 7, 7), tag


def _paper_numbers(name):
    with open(osp.join(ABLATIONS, name)) as f:
        header = ' '.join(line.lstrip('# ').strip() for line in f
                          if line.startswith('#'))
    return [float(v) for v in re.search(
        r'Paper: ([\d.]+) [\w-]+(?: AP)?(?: / ([\d.]+))?',
        header).groups() if v is not None]


def test_metafile_quotes_the_papers_numbers():
    with open(osp.join(ABLATIONS, 'metafile.yml')) as f:
        entries = {osp.basename(m['Config']): m
                   for m in yaml.safe_load(f)['Models']}
    assert set(entries) == set(CONFIGS)
    for name in CONFIGS:
        metrics = entries[name]['Results'][0]['Metrics']
        assert list(metrics.values()) == _paper_numbers(name), name
