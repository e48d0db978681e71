"""The peers' whole zoo: every config that mmdet, mmseg and mmpretrain
install whose backbone is ``SwinTransformer``, ``SwinTransformerV2`` or
``TNT`` works with only the backbone's ``type`` swapped for ours.

For each distinct model of the zoo (:mod:`helpers.peer_zoo` finds them
through mmengine; the configs that build the same model share one check),
in the peer's scope: the peer's whole model and ours are built from the
config, the peer's weights get distinct values and its state dict loads
into ours strictly, and the two agree on their parameter counts, on what
trains after ``.train()``, and, in eval mode on a seeded input that is
not a multiple of the window, on the backbone's outputs (float32) and on
the features the rest of the model consumes (``extract_feat``; a
classifier's logits; both models in float64, where the peers' necks
cannot amplify rounding past the tolerance). Where the peer cannot build
its whole model here (a text encoder fetched from a hub), or has no
``extract_feat`` (a video model), the backbones are compared, and the
peer's reason is reported. Every config's outcome (same, different, peer
unable) is counted at the end of the run (conftest.py); any "different"
fails. A sample runs in the fast tier, every model in the whole suite."""
import copy
import ctypes
import gc
import importlib
import itertools

import pytest
import torch
from mmengine.registry import DefaultScope

from helpers import randomise, sampled, skip_weight_init
from helpers.peer_zoo import PEERS, REPLACED, zoo_configs, zoo_models

CONFIGS = {package: zoo_configs(package) for package in PEERS}
MODELS = [model for package in PEERS for model in zoo_models(CONFIGS[package])]

# one model of each kind of check in the fast tier: a detector, GLIP (the
# peer cannot build it here), a 6-channel segmentor, each classifier family
FAST = ('swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py',
        'glip/glip_atss_swin-t_a_fpn_dyhead_pretrain_obj365.py',
        'swin/swin-tiny-patch4-window7_upernet_1xb8-20k_levir-256x256.py',
        'swin_transformer/swin-tiny_16xb64_in1k.py',
        'swin_transformer_v2/swinv2-tiny-w8_16xb64_in1k-256px.py',
        'tnt/tnt-s-p16_16xb64_in1k.py')

SAME, DIFFERENT, PEER_UNABLE = 'same', 'different', 'peer unable'
# max |diff| / max(1, max |output|), per output tensor. What we replace, the
# backbone, agrees in float32 to its rounding (Swin-L: 2e-6). What the rest
# of the model makes of it is compared in float64: the peers' necks amplify
# rounding (DyHead's six blocks turn the backbones' 2e-6 into 3e-5 to 1e-4,
# depending on the input, with every fast part off too), so in float32 no
# tolerance would both hold and catch a real difference; in float64 the
# same models agree to 1e-13.
BACKBONE_TOLERANCE = 1e-5
FEATURE_TOLERANCE = 1e-9


def _registry(package):
    return importlib.import_module(f'{package}.registry').MODELS


def _configs(model_cfg):
    """(the peer's model config, ours: only the backbone's type changed);
    the backbone's init_cfg names a download, never fetched here."""
    peer = copy.deepcopy(model_cfg)
    peer['backbone'].pop('init_cfg', None)
    ours = copy.deepcopy(peer)
    ours['backbone']['type'] = REPLACED[peer['backbone']['type']]
    return peer, ours


def _inputs(package, backbone):
    """A detector's or segmentor's input: 128x192, multiples of the
    largest stride (64) but not of any window (7, 12, 16 tokens of stride
    4). A classifier's: its training size plus 40 px, and its training
    size, where the last stage is one window, which the classifiers do not
    shift (TNT's: the training size, its position embedding has no
    other)."""
    channels = backbone.get('in_channels', 3)
    # the same input whatever ran before in this worker
    g = torch.Generator().manual_seed(0)
    if package != 'mmpretrain':
        return [torch.randn(1, channels, 128, 192, generator=g)]
    size = backbone.get('img_size', 224)
    size = size[0] if isinstance(size, (tuple, list)) else size
    sizes = [size] if backbone['type'] == 'TNT' else [size + 40, size]
    return [torch.randn(1, channels, s, s, generator=g) for s in sizes]


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = [out[k] for k in sorted(out)]
    return [t for o in out for t in _tensors(o)]


def _trainable(model, whole):
    """Trainable parameter elements after ``.train()`` (mmdet's and mmseg's
    backbones return None from it): per top-level part of a ``whole``
    model (the backbone one part), in all of a backbone."""
    model.train()
    parts = model.named_children() if whole else [('backbone', model)]
    return {name: sum(p.numel() for p in part.parameters()
                      if p.requires_grad) for name, part in parts}


def _differences(peer, ours, inputs, features, whole):
    """What differs between ``peer`` and ``ours`` (the peer's weights
    loaded into ours strictly), or an empty list."""
    found = []
    counts = [sum(p.numel() for p in m.parameters()) for m in (peer, ours)]
    if counts[0] != counts[1]:
        found.append(f'parameters: {counts[0]} (peer) != {counts[1]}')
    try:
        ours.load_state_dict(peer.state_dict(), strict=True)
    except RuntimeError as e:
        return found + [f'strict load: {str(e)[:500]}']
    trainable = [_trainable(m, whole) for m in (peer, ours)]
    if trainable[0] != trainable[1]:
        found.append(f'trainable after train(): {trainable[0]} (peer) != '
                     f'{trainable[1]}')
    peer.eval()
    ours.eval()
    checks = [('backbone', lambda m, x: m.backbone(x) if whole else m(x),
               torch.float32, BACKBONE_TOLERANCE)]
    if whole:
        checks.append(('features', features, torch.float64,
                       FEATURE_TOLERANCE))
    for (what, outputs, dtype, tolerance), x in itertools.product(
            checks, inputs):
        peer.to(dtype)
        ours.to(dtype)
        x = x.to(dtype)
        with torch.no_grad():
            theirs, mine = (_tensors(outputs(m, x)) for m in (peer, ours))
        if [t.shape for t in theirs] != [t.shape for t in mine]:
            return found + [
                f'{what} shapes: {[tuple(t.shape) for t in theirs]} (peer) '
                f'!= {[tuple(t.shape) for t in mine]}']
        worst = max(((a - b).abs().max() / a.abs().max().clamp(min=1)).item()
                    for a, b in zip(theirs, mine))
        if worst > tolerance:
            found.append(f'{what} differ: max |diff| / max(1, max |output|) '
                         f'= {worst:.1e} > {tolerance:.0e}')
    return found


def _features(package):
    if package == 'mmpretrain':
        return lambda model, x: model(x, mode='tensor')
    return lambda model, x: model.extract_feat(x)


def compare(zoo):
    """(outcome, detail) of one zoo model."""
    registry = _registry(zoo.package)
    peer_cfg, ours_cfg = _configs(zoo.model)
    inputs = _inputs(zoo.package, peer_cfg['backbone'])
    with DefaultScope.overwrite_default_scope(zoo.package):
        reason = None
        try:
            # every weight is set below: randomised, then copied into ours
            with skip_weight_init():
                peer = randomise(registry.build(copy.deepcopy(peer_cfg)))
        except Exception as e:  # the peer's own build, reported
            reason = f'{type(e).__name__}: {" ".join(str(e).split())[:200]}'
        else:
            if zoo.package != 'mmpretrain' and \
                    not hasattr(peer, 'extract_feat'):
                reason = (f'{type(peer).__name__} has no extract_feat; its '
                          'backbone compared')
        features = _features(zoo.package)
        if reason is not None:
            with skip_weight_init():
                peer = randomise(registry.build(peer_cfg['backbone']))
            peer_cfg, ours_cfg = peer_cfg['backbone'], ours_cfg['backbone']
            features = lambda model, x: model(x)  # noqa: E731
        try:
            with skip_weight_init():
                ours = registry.build(ours_cfg)
        except Exception as e:
            return DIFFERENT, f'ours does not build: {type(e).__name__}: {e}'
        found = _differences(peer, ours, inputs, features,
                             whole=reason is None)
    if found:
        return DIFFERENT, '; '.join(found)
    if reason is not None:
        return PEER_UNABLE, reason
    return SAME, ''


@pytest.fixture(autouse=True)
def _return_memory():
    """The sweep builds ~180 models of up to 300M parameters in one worker:
    after each, what they held goes back to the system (glibc keeps freed
    heap otherwise, and a worker grew past 12 GB alongside the other
    worker's tests)."""
    yield
    gc.collect()
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


@pytest.mark.parametrize(
    'zoo', sampled([(m, ) for m in MODELS],  # a ZooModel is a tuple
                   lambda one: one[0].configs[0] in FAST,
                   ids=[f'{m.package}:{m.configs[0]}' for m in MODELS]))
def test_peer_config_works_with_only_type_swapped(zoo, record_property):
    outcome, detail = compare(zoo)
    # every config that builds this model, for the run's counts
    record_property('peer_zoo', [(zoo.package, name, outcome, detail)
                                 for name in zoo.configs])
    assert outcome != DIFFERENT, f'{zoo.configs}: {detail}'


def test_the_sweep_finds_every_family_of_the_zoo(record_property):
    """What the sweep must find, in each peer (a filter that lost configs
    would shrink these). The candidates mmengine cannot read are counted
    with the peer's error (mmpretrain's in21k Swin V2 configs edit a
    ``test_pipeline`` their dataset base does not define)."""
    record_property('peer_zoo', [
        (c.package, c.name, 'peer config unreadable', c.error)
        for package in PEERS for c in CONFIGS[package] if c.model is None])
    names = {package: [c.name for c in CONFIGS[package] if c.model]
             for package in PEERS}
    for folder, at_least in (('glip/', 15), ('grounding_dino/', 15),
                             ('mm_grounding_dino/', 20), ('mask2former/', 5),
                             ('dino/', 2), ('rtmdet/', 2), ('v3det/', 5)):
        assert sum(n.startswith(folder) for n in names['mmdet']) >= \
            at_least, folder
    for folder in ('swin/', 'mask2former/', 'knet/', 'maskformer/'):
        assert any(n.startswith(folder) for n in names['mmseg']), folder
    for folder in ('swin_transformer/', 'swin_transformer_v2/', 'tnt/'):
        assert any(n.startswith(folder) for n in names['mmpretrain']), folder
    assert all(name in sum(names.values(), []) for name in FAST)
