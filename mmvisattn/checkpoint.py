"""Checkpoints, in one place: read files with errors that name the file,
pull a backbone's weights out of any wrapper and load them into a backbone
(refusing what does not fit), check a whole checkpoint against a model as
its load pre-hooks read it. Which checkpoint to resume from is
:mod:`mmvisattn.engine.resume`'s. Every layout conversion is dispatched
from the layout detectors in ``mmvisattn.models.utils``
(``swin_any_to_mmvisattn``, ``tnt_any_to_mmvisattn``) and the layers' load
pre-hooks."""
import json
import os.path as osp
import re
import zipfile
from collections import OrderedDict
from typing import Callable, Iterable, List, Optional, Tuple

import torch
import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.runner.checkpoint import CheckpointLoader

from mmvisattn.environment import safe_checkpoint_loading
from mmvisattn.utils.listing import short_listing


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used, with the file named."""


def checkpoint_damage(path: str) -> Optional[str]:
    """Why ``path`` is not a complete checkpoint, or None if it looks whole.

    ``torch.save`` writes a zip whose directory comes last, so a file cut
    short (killed writer, partial download) has no readable directory.
    """
    if not osp.isfile(path):
        return 'no such file'
    size = osp.getsize(path)
    if size == 0:
        return 'empty file (0 bytes)'
    with open(path, 'rb') as f:
        head = f.read(4)
    if head.startswith(b'PK'):
        try:
            with zipfile.ZipFile(path) as zf:
                zf.namelist()
        except zipfile.BadZipFile:
            return (f'truncated: a zip checkpoint without its directory '
                    f'({size} bytes; an interrupted write or download)')
        return None
    if head[:1] == b'\x80':  # torch's legacy (pre-1.6) pickle format
        return None
    return (f'not a PyTorch checkpoint (starts with {head!r}, {size} '
            'bytes)')


# What Hugging Face's save_pretrained writes, in the order it is looked for.
HF_WEIGHT_FILES = ('model.safetensors', 'model.safetensors.index.json',
                   'pytorch_model.bin', 'pytorch_model.bin.index.json')


def read_weights(path: str, logger: Optional[MMLogger] = None) -> dict:
    """Weights from any file a backbone's ``init_cfg`` may name: what
    mmengine's ``CheckpointLoader`` reads (local files, URLs,
    ``torchvision://``, ...), ``.safetensors`` files, and a Hugging Face
    ``save_pretrained`` folder (``model.safetensors`` or
    ``pytorch_model.bin``, sharded or not)."""
    if osp.isdir(path):
        found = [name for name in HF_WEIGHT_FILES
                 if osp.isfile(osp.join(path, name))]
        if not found:
            raise CheckpointError(
                f'{path}: a folder without weights (looked for '
                f'{", ".join(HF_WEIGHT_FILES)})')
        path = osp.join(path, found[0])
    if path.endswith('.index.json'):  # shards: {"weight_map": {key: file}}
        with open(path) as f:
            shards = sorted(set(json.load(f)['weight_map'].values()))
        state = OrderedDict()
        for shard in shards:
            state.update(read_weights(osp.join(osp.dirname(path), shard)))
        return state
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        return load_file(path)
    # a full mmengine checkpoint (a whole detector's) under torch's safe
    # loader: this read only (mmvisattn/environment.py, item 1)
    with safe_checkpoint_loading():
        return CheckpointLoader.load_checkpoint(path, map_location='cpu',
                                                logger=logger)


def read_checkpoint(path: str) -> dict:
    """Load a checkpoint on the CPU; every failure names the file."""
    damage = checkpoint_damage(path)
    if damage is not None:
        raise CheckpointError(f'{path}: {damage}')
    try:
        with safe_checkpoint_loading():
            return CheckpointLoader.load_checkpoint(path, map_location='cpu')
    except Exception as e:  # torch reports zip/pickle details, not the file
        raise CheckpointError(
            f'{path}: corrupt checkpoint, torch.load failed with '
            f'{type(e).__name__}: {str(e).splitlines()[0][:300]}') from e


# torch's one report of a shape that does not fit (load_state_dict raises it
# after loading every other tensor)
_SIZE_MISMATCH = re.compile(
    r'size mismatch for (\S+): copying a param with shape '
    r'torch\.Size\(\[([^\]]*)\]\) from checkpoint, the shape in current '
    r'model is torch\.Size\(\[([^\]]*)\]\)')


def _dims(text: str) -> Tuple[int, ...]:
    return tuple(int(d) for d in text.split(',') if d.strip())


def load_and_compare(model: nn.Module, state: dict,
                     allowed_missing: Callable[[str], bool] = lambda k: False,
                     allowed_unexpected: Callable[[str], bool] = lambda k: False
                     ) -> Tuple[List[str], List[str]]:
    """Load ``state`` into ``model`` with its own ``load_state_dict``
    (non-strict; the modules' load pre-hooks rename older layouts and drop
    derived buffers on the way) and report what did not fit, as readable
    lines (shape mismatches, missing keys not ``allowed_missing``,
    unexpected keys not ``allowed_unexpected``; empty when it fits), and
    the allowed missing keys (left as the model had them). The keys are
    those ``load_state_dict`` itself reports after the pre-hooks, caught
    by a load post-hook on ``model``.
    """
    seen = {}

    def record(module, incompatible):
        seen['missing'] = list(incompatible.missing_keys)
        seen['unexpected'] = list(incompatible.unexpected_keys)

    handle = model.register_load_state_dict_post_hook(record)
    mismatched = []
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        mismatched = [
            f'{key}: checkpoint {_dims(checkpoint)} vs model {_dims(own)}'
            for key, checkpoint, own in _SIZE_MISMATCH.findall(str(err))]
        if not mismatched:
            raise
    finally:
        handle.remove()
    own_keys = len(model.state_dict())
    missing = sorted(k for k in seen['missing'] if not allowed_missing(k))
    kept = sorted(k for k in seen['missing'] if allowed_missing(k))
    unexpected = sorted(k for k in seen['unexpected']
                        if not allowed_unexpected(k))
    problems = []
    if mismatched:
        problems.append(f'{len(mismatched)} shape mismatches: '
                        f'{short_listing(mismatched)}')
    if missing:
        problems.append(f'{len(missing)} of the model\'s {own_keys} keys '
                        f'missing from the checkpoint: '
                        f'{grouped_keys(missing)}')
    if unexpected:
        problems.append(f'{len(unexpected)} unexpected keys in the '
                        f'checkpoint: {grouped_keys(unexpected)}')
    return problems, kept


def release_classifier_state_dict(checkpoint: dict, model: nn.Module
                                  ) -> Optional['OrderedDict[str, torch.Tensor]']:
    """A released classifier file as the whole-model state dict of
    ``model``, or None when it is not one or ``model`` is no classifier.

    The official releases (microsoft/Swin-Transformer's ``{'model': ...}``,
    huawei-noah TNT's and timm's bare state dicts, timm train.py's
    ``{'state_dict': ...}``) keep the backbone at the top level and the
    classifier as ``head.weight`` / ``head.bias`` (Hugging Face's
    ``Swin(v2)ForImageClassification``: ``swin(v2).*`` and
    ``classifier``); mmengine would match none of an ``ImageClassifier``'s
    keys and load nothing. Here the backbone part goes under ``backbone.``
    as it is (the backbone's load pre-hook reads and converts its layout,
    as for every load), and the head onto mmpretrain's ``head.fc``. A file
    that already has ``backbone.`` keys (ours, mmpretrain's) is a whole
    model and is left to the load pre-hooks.
    """
    from mmvisattn.models.backbones.base import BackboneBase
    backbone = getattr(model, 'backbone', None)
    fc = getattr(getattr(model, 'head', None), 'fc', None)
    if not (isinstance(backbone, BackboneBase)
            and isinstance(fc, nn.Linear) and isinstance(checkpoint, dict)):
        return None
    state = extract_state_dict(checkpoint, prefix=None)
    if not state or any(k.startswith('backbone.') for k in state) or \
            not all(isinstance(v, torch.Tensor) for v in state.values()):
        return None
    head = OrderedDict()
    for key in list(state):
        if key in ('head.weight', 'head.bias'):  # official, timm < 0.9
            head['head.fc.' + key[len('head.'):]] = state.pop(key)
        elif key.startswith('head.fc.'):  # timm >= 0.9
            head[key] = state.pop(key)
        elif key in ('classifier.weight', 'classifier.bias'):  # transformers
            head['head.fc.' + key[len('classifier.'):]] = state.pop(key)
    whole = OrderedDict(('backbone.' + k, v) for k, v in state.items())
    whole.update(head)
    return whole


def verify_checkpoint(path: str, model: nn.Module,
                      checkpoint: Optional[dict] = None) -> None:
    """Refuse a checkpoint that does not fit ``model`` exactly.

    mmengine's ``load_from`` loads non-strictly: a checkpoint of another
    architecture only logs a warning and the test then scores random
    weights. Here missing keys, unexpected keys and shape mismatches stop
    with the file named. The file is loaded into ``model`` to compare the
    keys as the model reads them (after its load pre-hooks: a release or
    peer-layout checkpoint that loads passes); callers load the same file
    next. A released classifier is read as
    :func:`release_classifier_state_dict` reads it.
    """
    checkpoint = read_checkpoint(path) if checkpoint is None else checkpoint
    state = release_classifier_state_dict(checkpoint,
                                          getattr(model, 'module', model))
    if state is None:
        state = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state, dict) or not state:
        raise CheckpointError(f'{path}: holds no state_dict (top-level keys: '
                              f'{short_listing(sorted(map(str, checkpoint)))})')
    state = {re.sub(r'^module\.', '', k): v for k, v in state.items()}
    problems, _ = load_and_compare(getattr(model, 'module', model), state)
    if problems:
        raise CheckpointError(
            f'{path}: does not match the model built from the config '
            f'(another architecture or config?): ' + '; '.join(problems))


def extract_state_dict(checkpoint,
                       prefix: Optional[str] = 'backbone.'
                       ) -> 'OrderedDict[str, torch.Tensor]':
    """The backbone's weights from a raw file, a runner checkpoint or a detector.

    Accepts ``{'state_dict': ...}`` (mmengine), ``{'model': ...}`` (official
    releases), a bare state dict, the ``module.`` prefix of DDP, and whole
    detector/segmentor checkpoints (keys under ``backbone.``).
    ``prefix=None`` keeps every key (the whole model, unwrapped).
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f'a checkpoint must be a dict, got {type(checkpoint)}')
    for field in ('state_dict', 'model', 'module'):
        if field in checkpoint and isinstance(checkpoint[field], dict):
            checkpoint = checkpoint[field]
            break
    state = OrderedDict((k[7:] if k.startswith('module.') else k, v)
                        for k, v in checkpoint.items())
    if prefix is not None and any(k.startswith(prefix) for k in state):
        state = OrderedDict((k[len(prefix):], v) for k, v in state.items()
                            if k.startswith(prefix))
    return state


def _natural_key(key: str):
    return [int(t) if t.isdigit() else t for t in re.split(r'(\d+)', key)]


def grouped_keys(keys: Iterable[str], limit: int = 8) -> str:
    """Short listing: keys grouped by module (e.g. ``layers.2.blocks.6.*``)."""
    groups = OrderedDict()
    for key in sorted(keys, key=_natural_key):
        parts = key.split('.')
        group = '.'.join(parts[:4]) + ('.*' if len(parts) > 4 else '')
        groups[group] = groups.get(group, 0) + 1
    names = list(groups)
    more = f' ... and {len(names) - limit} more' if len(names) > limit else ''
    return ', '.join(names[:limit]) + more


def load_pretrained(model: nn.Module,
                    checkpoint: str,
                    allowed_missing: Callable[[str], bool] = lambda k: False,
                    allowed_unexpected: Callable[[str], bool] = lambda k: False,
                    logger: Optional[MMLogger] = None) -> None:
    """Load ``checkpoint`` into ``model``; refuse a checkpoint that does not fit.

    The file is read and its backbone's weights extracted; the model's own
    ``load_state_dict`` pre-hooks read the layout, convert it and resize
    tensors that legitimately differ (position tables). Any shape
    mismatch, any missing key not ``allowed_missing`` and any unexpected key
    not ``allowed_unexpected`` raises a ``ValueError`` naming the file, the
    keys and the shapes, since a partially loaded backbone would silently
    train from a wrong start.
    """
    logger = logger or MMLogger.get_current_instance()
    raw = read_weights(checkpoint, logger)
    state = extract_state_dict(raw)
    name = model.__class__.__name__
    problems, kept = load_and_compare(model, state, allowed_missing,
                                      allowed_unexpected)
    if problems:
        raise ValueError(
            f'checkpoint {checkpoint!r} does not match this {name} (wrong '
            f'architecture or arch/embed_dims/depths/window_size?): '
            + ' | '.join(problems))
    if kept:
        logger.info(f'{name}: initialised from scratch (not in '
                    f'{checkpoint}): {grouped_keys(kept)}')
    logger.info(f'{name}: loaded from {checkpoint}')
