"""mmvisattn/configs/: the headline configs in mmengine's pure-Python form,
derived from configs/ by dev/make_python_configs.py. Each file is
current (the same text the script writes now), and each builds the same
model as its text twin: parameter count, frozen parameters, modules in
eval mode and a hash of the backbone's outputs with seeded weights
(dev/check_unchanged.py's row), compared through mmengine's own
Config.fromfile and registry build."""
import math
import os.path as osp

import pytest

from helpers import load_tool, sampled

generator = load_tool('dev/make_python_configs.py')
unchanged = load_tool('dev/check_unchanged.py')

PAIRS = list(generator.pairs())
IDS = [osp.basename(python) for _, python in PAIRS]
# the cheapest twin to build, for the seeded differences
CLASSIFIER = next(p for p in PAIRS if p[1].endswith(
    'swin_t_p4_w7_16xb64_300e_in1k.py'))


def row(path):
    described = unchanged.describe(path)
    described.pop('config')
    return described


def test_every_headline_config_has_its_python_form():
    assert len(PAIRS) == 28
    for text, python in PAIRS:
        assert osp.isfile(text), text
        assert osp.isfile(python), (
            f'{python} is missing: run python dev/make_python_configs.py')
        assert osp.isfile(osp.join(osp.dirname(python), '__init__.py'))


# one per family in the fast tier, every one in the whole suite
FAST_CURRENT = {'cascade_mask_rcnn_swin_t_p4_w7_fpn_giou_4conv1f_ms_crop_3x_coco.py',
                'upernet_swinv2_t_w16_8xb2_160k_ade20k_512x512.py',
                'tnt_s_p16_16xb64_300e_in1k.py',
                'upernet_rswatt_t_8xb2_160k_ade20k_512x512.py'}


@pytest.mark.parametrize(
    'text,python',
    sampled(PAIRS, fast=lambda pair: osp.basename(pair[1]) in FAST_CURRENT,
            ids=IDS))
def test_python_config_is_current(text, python):
    with open(python) as f:
        written = f.read()
    assert written == generator.python_config(text), (
        f'{osp.relpath(python, generator.ROOT)} is stale: run '
        'python dev/make_python_configs.py')


def test_python_config_names_our_classes_not_registry_strings():
    """The Python form imports what it builds: no ``custom_imports`` and
    no ``'mmvisattn.<Name>'`` string that only a registry scope resolves."""
    for _, python in PAIRS:
        with open(python) as f:
            text = f.read()
        assert "'mmvisattn." not in text and 'custom_imports' not in text
        assert 'from mmvisattn.' in text, python


def test_module_names_are_python_identifiers():
    for _, python in PAIRS:
        assert osp.splitext(osp.basename(python))[0].isidentifier(), python
    assert generator.module_name('htc++_swin-b-p4-w7_fpn_6x_coco') == \
        'htcpp_swin_b_p4_w7_fpn_6x_coco'


@pytest.mark.parametrize(
    'text,python',
    sampled(PAIRS, fast=lambda pair: pair == CLASSIFIER, ids=IDS))
def test_python_config_builds_the_same_model_as_its_twin(text, python):
    ours, twin = row(python), row(text)
    assert 'error' not in ours['backbone_outputs'], ours
    assert all(math.isfinite(v) for v in ours['backbone_samples'])
    assert ours == twin


# seeded differences, each of what the twin check compares
SEEDED = {
    'params': "model['backbone']['depths'] = [2, 2, 4, 2]\n",
    'frozen_params': "model['backbone']['frozen_stages'] = 1\n",
    'backbone_outputs': "model['backbone']['qk_scale'] = 0.1\n",
}


@pytest.mark.parametrize('field', sorted(SEEDED))
def test_twin_check_fails_on_a_seeded_difference(tmp_path, field):
    text, python = CLASSIFIER
    with open(python) as f:
        source = f.read()
    seeded = tmp_path / osp.basename(python)
    seeded.write_text(source + SEEDED[field])
    ours, twin = row(str(seeded)), row(text)
    assert ours != twin
    assert ours[field] != twin[field]
