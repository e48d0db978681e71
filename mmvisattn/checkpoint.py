"""Checkpoints, in one place: read files with errors that name the file,
pull a backbone's weights out of any wrapper and load them into a backbone
(refusing what does not fit), check a whole checkpoint against a model as
its load pre-hooks read it, and find the newest complete one to resume
from. Every layout conversion is dispatched from the layout detectors in
``mmvisattn.models.utils`` (``swin_any_to_mmvisattn``,
``tnt_any_to_mmvisattn``) and the layers' load pre-hooks."""
import glob
import os
import os.path as osp
import re
import zipfile
from collections import OrderedDict
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import torch
import torch.nn as nn
from mmengine.logging import MMLogger, print_log
from mmengine.runner.checkpoint import CheckpointLoader, _load_checkpoint

from mmvisattn.utils.listing import short_listing

PARTIAL_SUFFIX = '.partial'


def partial_path(path: str) -> str:
    """Where a checkpoint is written before it is complete (hidden name)."""
    folder, name = osp.split(path)
    return osp.join(folder, f'.{name}{PARTIAL_SUFFIX}')



class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used, with the file named."""


def _damage(path: str) -> Optional[str]:
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


def read_checkpoint(path: str) -> dict:
    """Load a checkpoint on the CPU; every failure names the file."""
    damage = _damage(path)
    if damage is not None:
        raise CheckpointError(f'{path}: {damage}')
    try:
        return _load_checkpoint(path, map_location='cpu')
    except Exception as e:  # torch reports zip/pickle details, not the file
        raise CheckpointError(
            f'{path}: corrupt checkpoint, torch.load failed with '
            f'{type(e).__name__}: {str(e).splitlines()[0][:300]}') from e


def as_the_model_reads_it(model: nn.Module, state: dict) -> dict:
    """``state`` as ``model.load_state_dict`` sees it after the modules' own
    load pre-hooks (older key names renamed, derived buffers dropped, e.g.
    :class:`~mmvisattn.models.layers.Mlp`), without loading anything."""
    state = OrderedDict(state)
    for name, module in model.named_modules():
        prefix = f'{name}.' if name else ''
        for hook in module._load_state_dict_pre_hooks.values():
            hook(state, prefix, {}, True, [], [], [])
    return state


def release_classifier_state_dict(checkpoint: dict, model: nn.Module
                                  ) -> Optional['OrderedDict[str, torch.Tensor]']:
    """A released classifier file as the whole-model state dict of
    ``model``, or None when it is not one or ``model`` is no classifier.

    The official releases (microsoft/Swin-Transformer's ``{'model': ...}``,
    huawei-noah TNT's and timm's bare state dicts, timm train.py's
    ``{'state_dict': ...}``) keep the backbone at the top level and the
    classifier as ``head.weight`` / ``head.bias``; mmengine would match none
    of an ``ImageClassifier``'s keys and load nothing. Here the backbone part
    goes through the backbone's own ``convert_checkpoint`` (the conversion
    its ``init_cfg`` uses) under ``backbone.``, and the head onto
    mmpretrain's ``head.fc``. A file that already has ``backbone.`` keys
    (ours, mmpretrain's) is a whole model and is left to the load pre-hooks.
    """
    backbone = getattr(model, 'backbone', None)
    fc = getattr(getattr(model, 'head', None), 'fc', None)
    if not (hasattr(backbone, 'convert_checkpoint')
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
    whole = OrderedDict(('backbone.' + k, v)
                        for k, v in backbone.convert_checkpoint(state).items())
    whole.update(head)
    return whole


def verify_checkpoint(path: str, model: nn.Module,
                      checkpoint: Optional[dict] = None) -> None:
    """Refuse a checkpoint that does not fit ``model`` exactly.

    mmengine's ``load_from`` loads non-strictly: a checkpoint of another
    architecture only logs a warning and the test then scores random
    weights. Here missing keys, unexpected keys and shape mismatches stop
    with the file named. Keys are compared as the model reads them (after
    its load pre-hooks), so a release or older-layout checkpoint that loads
    passes; a released classifier is read as
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
    state = as_the_model_reads_it(getattr(model, 'module', model), state)
    expected = {
        re.sub(r'^(module\.)+', '', k): v
        for k, v in model.state_dict().items()
    }
    problems = key_mismatches(state, expected)
    if problems:
        raise CheckpointError(
            f'{path}: does not match the model built from the config '
            f'(another architecture or config?): ' + '; '.join(problems))


def _step(path: str) -> int:
    match = re.search(r'(\d+)\.pth$', path)
    return int(match.group(1)) if match else -1


def latest_complete_checkpoint(
        work_dir: str) -> Tuple[Optional[str], List[str]]:
    """The checkpoint to resume from and any half-written leftovers.

    Prefers the file named in ``last_checkpoint``; when that is missing,
    empty or damaged, the newest ``iter_*.pth`` / ``epoch_*.pth`` that is
    complete. Returns ``(path or None, partial files found)``.
    """
    partials = sorted(glob.glob(osp.join(work_dir, f'.*{PARTIAL_SUFFIX}')))
    candidates = []
    pointer = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(pointer):
        with open(pointer) as f:
            named = f.read().strip()
        if named:
            candidates.append(named)
    found = glob.glob(osp.join(work_dir, 'iter_*.pth')) + \
        glob.glob(osp.join(work_dir, 'epoch_*.pth'))
    candidates += sorted(found, key=_step, reverse=True)
    for path in candidates:
        damage = _damage(path)
        if damage is None:
            return path, partials
        print_log(f'resume: skipping {path} ({damage})', logger='current')
    return None, partials


def remove_partials(partials: List[str]) -> None:
    for path in partials:
        print_log(
            f'resume: removing {path}, a checkpoint whose write was '
            'interrupted', logger='current')
        try:
            os.remove(path)
        except FileNotFoundError:  # another rank was first
            pass


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


def key_mismatches(state: dict, own: dict,
                   allowed_missing: Callable[[str], bool] = lambda k: False,
                   allowed_unexpected: Callable[[str], bool] = lambda k: False
                   ) -> List[str]:
    """What keeps ``state`` from loading into a model whose state dict is
    ``own``: shape mismatches, missing and unexpected keys (each allowed
    key aside), as readable lines; empty when it fits. The one comparison
    behind :func:`verify_checkpoint` and :func:`load_pretrained`."""
    mismatched = [
        f'{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(v.shape)}'
        for k, v in own.items()
        if k in state and hasattr(state[k], 'shape')
        and tuple(state[k].shape) != tuple(v.shape)
    ]
    missing = sorted(k for k in own
                     if k not in state and not allowed_missing(k))
    unexpected = sorted(k for k in state
                        if k not in own and not allowed_unexpected(k))
    problems = []
    if mismatched:
        problems.append(f'{len(mismatched)} shape mismatches: '
                        f'{short_listing(mismatched)}')
    if missing:
        problems.append(f'{len(missing)} of the model\'s {len(own)} keys '
                        f'missing from the checkpoint: '
                        f'{grouped_keys(missing)}')
    if unexpected:
        problems.append(f'{len(unexpected)} unexpected keys in the '
                        f'checkpoint: {grouped_keys(unexpected)}')
    return problems


def load_pretrained(model: nn.Module,
                    checkpoint: str,
                    convert: Optional[Callable[[Dict], Dict]] = None,
                    allowed_missing: Callable[[str], bool] = lambda k: False,
                    allowed_unexpected: Callable[[str], bool] = lambda k: False,
                    logger: Optional[MMLogger] = None) -> Dict:
    """Load ``checkpoint`` into ``model``; refuse a checkpoint that does not fit.

    ``convert`` maps the extracted state dict to the model's layout (it may
    resize tensors that legitimately differ, e.g. position tables). Any shape
    mismatch, any missing key not ``allowed_missing`` and any unexpected key
    not ``allowed_unexpected`` raises a ``ValueError`` naming the file, the
    keys and the shapes, since a partially loaded backbone would silently
    train from a wrong start.
    """
    logger = logger or MMLogger.get_current_instance()
    raw = CheckpointLoader.load_checkpoint(checkpoint, map_location='cpu',
                                           logger=logger)
    state = extract_state_dict(raw)
    if convert is not None:
        state = convert(state)
    state = as_the_model_reads_it(model, state)
    own = model.state_dict()
    name = model.__class__.__name__
    problems = key_mismatches(state, own, allowed_missing,
                              allowed_unexpected)
    if problems:
        raise ValueError(
            f'checkpoint {checkpoint!r} does not match this {name} (wrong '
            f'architecture or arch/embed_dims/depths/window_size?): '
            + ' | '.join(problems))
    result = model.load_state_dict(
        {k: v for k, v in state.items() if k in own}, strict=False)
    if result.missing_keys:
        logger.info(f'{name}: initialised from scratch (not in '
                    f'{checkpoint}): {grouped_keys(result.missing_keys)}')
    logger.info(f'{name}: loaded {len(state)} tensors from {checkpoint}')
    return state
