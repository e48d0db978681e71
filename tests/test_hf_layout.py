"""Hugging Face layouts, against transformers' own models: ``SwinModel``,
``SwinBackbone``, ``Swinv2Model``, ``Swinv2Backbone`` and the classifiers,
built with random weights and saved by ``save_pretrained``
(``model.safetensors``, sharded or not) or as ``pytorch_model.bin``.

Reading: ours built with ``init_cfg`` naming the file (or the folder)
gives the reference's features, fp32. Writing:
``tools/model_converters/mmvisattn2official.py --to huggingface`` writes a
folder that transformers' ``from_pretrained`` loads with no key missing or
left over, and whose model gives ours' features.

What is compared: V1's ``SwinBackbone`` has an output norm per stage, as
ours under mmdet's convention, and shifts every other block at every size,
as ours pads a small map: stages are compared as they are, also at a size
that is not a multiple of the window. Hugging Face's V2 (as the authors'
classifier) shrinks a window to a map smaller than it and has no output
norms: ours is built with ``pad_small_map=False`` and the output norms of
stages 0-2 at LayerNorm's identity, the reference's raw stages are
normalised the same way, and stage 3 goes through ``Swinv2Model``'s final
``layernorm``.
"""
import json

import pytest
import torch
import torch.nn.functional as F

import mmvisattn  # noqa: F401
from helpers import load_converter, randomise
from mmvisattn.checkpoint import release_classifier_state_dict
from mmvisattn.models.backbones import SwinTransformer, SwinTransformerV2
from mmvisattn.models.utils import detect_swin_layout, extract_state_dict

transformers = pytest.importorskip(
    'transformers', reason='transformers (the tests extra) is not installed; '
    'make test installs it')

ATOL = 1e-5
# A small Swin: four stages, every block kind, two blocks per stage.
ARCH = dict(embed_dim=48, depths=[2, 2, 2, 2], num_heads=[3, 6, 12, 24])
OURS_ARCH = dict(embed_dims=48, depths=[2, 2, 2, 2], num_heads=[3, 6, 12, 24])


def _image(*size):
    return torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(1))


def _hf(cls, **config):
    config_cls = (transformers.Swinv2Config if 'v2' in cls.__name__.lower()
                  else transformers.SwinConfig)
    torch.manual_seed(0)
    model = cls(config_cls(**dict(ARCH, **config), drop_path_rate=0.))
    return randomise(model).eval()


@pytest.fixture(scope='module')
def hf_v1_backbone():
    return _hf(transformers.SwinBackbone, image_size=224, window_size=7,
               out_features=['stage1', 'stage2', 'stage3', 'stage4'])


@pytest.fixture(scope='module')
def hf_v2_model():
    return _hf(transformers.Swinv2Model, image_size=256, window_size=8)


def _ours_v1(**kwargs):
    return SwinTransformer(**OURS_ARCH, window_size=7,
                           out_indices=(0, 1, 2, 3), **kwargs).eval()


def _ours_v2(**kwargs):
    arch = dict(embed_dims=48, depths=[2, 2, 2, 2], num_heads=[3, 6, 12, 24])
    return SwinTransformerV2(arch, window_size=8, out_indices=(0, 1, 2, 3),
                             pad_small_map=False, **kwargs).eval()


def _v1_stages(backbone, x):
    with torch.no_grad():
        return list(backbone(x).feature_maps)


def _v2_stages(model, x):
    """Raw stages before their merging (the encoder's public flag), the
    first three at LayerNorm's identity, the last through ``layernorm``."""
    with torch.no_grad():
        embedded, dims = model.embeddings(x)
        raw = model.encoder(
            embedded, dims, output_hidden_states=True,
            output_hidden_states_before_downsampling=True,
            return_dict=True).reshaped_hidden_states[1:]
    out = [F.layer_norm(s.permute(0, 2, 3, 1), s.shape[1:2]) for s in raw[:-1]]
    with torch.no_grad():
        out.append(model.layernorm(raw[-1].permute(0, 2, 3, 1)))
    return [o.permute(0, 3, 1, 2) for o in out]


def _assert_equal(ours, want, x):
    with torch.no_grad():
        got = ours(x)
    assert len(got) == len(want) == 4
    for a, b in zip(got, want):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=ATOL)


def _save(model, folder, how):
    """``save_pretrained`` (``model.safetensors``), sharded into several
    files, or the older ``pytorch_model.bin``."""
    if how == 'bin':
        folder.mkdir()
        model.config.to_json_file(str(folder / 'config.json'))
        torch.save(model.state_dict(), folder / 'pytorch_model.bin')
    else:
        model.save_pretrained(
            folder, **({'max_shard_size': '500KB'} if how == 'sharded' else {}))
    return folder


def _pretrained(path):
    return dict(init_cfg=dict(type='Pretrained', checkpoint=str(path)))


@pytest.mark.parametrize('how', ['safetensors', 'bin', 'sharded'])
def test_reads_swin_backbone(hf_v1_backbone, tmp_path, how):
    folder = _save(hf_v1_backbone, tmp_path / 'hf', how)
    if how == 'sharded':
        assert (folder / 'model.safetensors.index.json').is_file()
    ours = _ours_v1(**_pretrained(folder))
    ours.init_weights()
    for size in ((224, 224), (200, 296)):  # the second is padded
        x = _image(*size)
        _assert_equal(ours, _v1_stages(hf_v1_backbone, x), x)


def test_load_state_dict_reads_the_layout(hf_v1_backbone):
    """``load_state_dict`` itself (``load_from``, ``resume``, a whole
    model's state dict) converts the layout in the backbone's pre-hook."""
    ours = _ours_v1()
    ours.load_state_dict(hf_v1_backbone.state_dict())  # strict
    x = _image(224, 224)
    _assert_equal(ours, _v1_stages(hf_v1_backbone, x), x)


def test_reads_swinv2_model_file(hf_v2_model, tmp_path):
    folder = _save(hf_v2_model, tmp_path / 'hf', 'safetensors')
    ours = _ours_v2(**_pretrained(folder / 'model.safetensors'))
    ours.init_weights()
    x = _image(256, 256)
    _assert_equal(ours, _v2_stages(hf_v2_model, x), x)


@pytest.fixture
def convert(monkeypatch, tmp_path):
    """``mmvisattn2official.py --to huggingface``, in-process: our
    backbone or model ``state_dict`` -> a folder; returns the folder."""
    converter = load_converter('mmvisattn2official', monkeypatch)

    def run(state_dict, *options):
        torch.save({'state_dict': state_dict}, tmp_path / 'ours.pth')
        converter.main([str(tmp_path / 'ours.pth'), str(tmp_path / 'hf'),
                        '--to', 'huggingface', *options])
        return tmp_path / 'hf'

    return run


def _from_pretrained(cls, folder):
    model, info = cls.from_pretrained(folder, output_loading_info=True)
    assert not any(info[k] for k in ('missing_keys', 'unexpected_keys',
                                     'mismatched_keys')), info
    return model.eval()


def test_writes_swinv2_model(convert):
    ours = randomise(_ours_v2())
    folder = convert(ours.state_dict(), '--window-size', '8')
    config = json.loads((folder / 'config.json').read_text())
    assert config['model_type'] == 'swinv2' and config['window_size'] == 8
    hf = _from_pretrained(transformers.Swinv2Model, folder)
    with torch.no_grad():  # the output norms of stages 0-2: identity
        for i in range(3):
            getattr(ours, f'norm{i}').reset_parameters()
    x = _image(256, 256)
    _assert_equal(ours, _v2_stages(hf, x), x)


def test_writes_swin_backbone_model(convert):
    """Our V1 -> ``SwinModel``'s layout, read by ``SwinBackbone``: its
    output norms are ``SwinModel``'s extras, so they come from ours by
    name, and the features equal ours."""
    ours = randomise(_ours_v1())
    folder = convert(ours.state_dict())
    hf = _from_pretrained(transformers.SwinModel, folder)
    backbone = transformers.SwinBackbone(transformers.SwinConfig.from_pretrained(
        folder, out_features=['stage1', 'stage2', 'stage3', 'stage4']))
    # transformers >= 4.50 keeps SwinModel under ``swin``; earlier, its
    # embeddings and encoder directly
    body = getattr(backbone, 'swin', backbone)
    result = body.load_state_dict(hf.state_dict(), strict=False)
    assert all(k.startswith('hidden_states_norms.')
               for k in result.missing_keys)
    assert sorted(result.unexpected_keys) in ([], ['layernorm.bias',
                                           'layernorm.weight'])
    with torch.no_grad():
        for i in range(4):
            norm = backbone.hidden_states_norms[f'stage{i + 1}']
            norm.load_state_dict(getattr(ours, f'norm{i}').state_dict())
    x = _image(224, 224)
    _assert_equal(ours, _v1_stages(backbone.eval(), x), x)


def test_v2_classifier_both_ways(convert):
    """``Swinv2ForImageClassification`` -> ours (the release-classifier
    path that ``tools/test.py`` and ``load_from`` use) -> back: the logits
    of all three equal."""
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    hf = _hf(transformers.Swinv2ForImageClassification, image_size=256,
             window_size=8, num_labels=10)
    init_default_scope('mmpretrain')
    ours = MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='mmvisattn.SwinTransformerV2',
                      arch=dict(embed_dims=48, depths=[2, 2, 2, 2],
                                num_heads=[3, 6, 12, 24]), window_size=8),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', num_classes=10, in_channels=384)))
    state = release_classifier_state_dict(hf.state_dict(), ours)
    ours.load_state_dict(state)
    ours.eval()
    x = _image(256, 256)
    with torch.no_grad():
        want = hf(x).logits
        got = ours(x, mode='tensor')
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL)

    folder = convert(ours.state_dict(), '--window-size', '8', '--keep-heads')
    back = _from_pretrained(transformers.Swinv2ForImageClassification, folder)
    with torch.no_grad():
        torch.testing.assert_close(back(x).logits, want, rtol=0, atol=ATOL)


@pytest.mark.parametrize('cls', ['SwinModel', 'SwinForImageClassification',
                                 'SwinBackbone', 'Swinv2Model',
                                 'Swinv2ForImageClassification',
                                 'Swinv2Backbone'])
def test_every_wrapper_is_detected(cls):
    config_cls = (transformers.Swinv2Config if 'v2' in cls
                  else transformers.SwinConfig)
    config = config_cls(embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                        image_size=32, window_size=4)
    state = getattr(transformers, cls)(config).state_dict()
    assert detect_swin_layout(extract_state_dict(state)) == 'huggingface'


def test_v2_converter_asks_for_the_window(convert):
    with pytest.raises(SystemExit, match='give window_size'):
        convert(_ours_v2().state_dict())


@pytest.mark.slow
def test_padded_detection_size_equals_hf_swinv2():
    """V2-T at 800x1216: the maps of stages 1-3 (100x152, 50x76, 25x38)
    are not multiples of window 8. Hugging Face's ``Swinv2Model`` pads as
    ours does (pad, then shift, the mask over the padded map), so every
    stage is compared; timm shifts before it pads (tests/test_swin_v2.py
    compares the one stage where that makes no difference)."""
    hf = _hf(transformers.Swinv2Model, embed_dim=96, depths=[2, 2, 6, 2],
             num_heads=[3, 6, 12, 24], image_size=[800, 1216], window_size=8)
    ours = SwinTransformerV2('tiny', window_size=8)  # mmdet's: pads
    result = ours.load_state_dict(extract_state_dict(
        {'state_dict': _converted(hf)}), strict=False)
    assert not result.unexpected_keys
    x = _image(800, 1216)
    _assert_equal(ours.eval(), _v2_stages(hf, x), x)


def _converted(hf):
    from mmvisattn.models.utils import swin_any_to_mmvisattn
    return swin_any_to_mmvisattn(hf.state_dict())
