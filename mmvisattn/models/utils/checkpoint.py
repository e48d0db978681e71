"""Loading pretrained weights into a backbone, with errors that name the problem."""
import re
from collections import OrderedDict
from typing import Callable, Dict, Iterable, Optional

import torch
import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.runner.checkpoint import CheckpointLoader


def extract_state_dict(checkpoint, prefix: str = 'backbone.'
                       ) -> 'OrderedDict[str, torch.Tensor]':
    """The backbone's weights from a raw file, a runner checkpoint or a detector.

    Accepts ``{'state_dict': ...}`` (mmengine), ``{'model': ...}`` (official
    releases), a bare state dict, the ``module.`` prefix of DDP, and whole
    detector/segmentor checkpoints (keys under ``backbone.``).
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f'a checkpoint must be a dict, got {type(checkpoint)}')
    for field in ('state_dict', 'model', 'module'):
        if field in checkpoint and isinstance(checkpoint[field], dict):
            checkpoint = checkpoint[field]
            break
    state = OrderedDict((k[7:] if k.startswith('module.') else k, v)
                        for k, v in checkpoint.items())
    if any(k.startswith(prefix) for k in state):
        state = OrderedDict((k[len(prefix):], v) for k, v in state.items()
                            if k.startswith(prefix))
    return state


def _natural_key(key: str):
    return [int(t) if t.isdigit() else t for t in re.split(r'(\d+)', key)]


def _describe(keys: Iterable[str], limit: int = 8) -> str:
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
    own = model.state_dict()
    name = model.__class__.__name__
    mismatched = [
        f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
        for k, v in state.items() if k in own and v.shape != own[k].shape
    ]
    missing = [k for k in own if k not in state and not allowed_missing(k)]
    unexpected = [
        k for k in state if k not in own and not allowed_unexpected(k)
    ]
    if mismatched or missing or unexpected:
        problems = []
        if mismatched:
            problems.append(f'{len(mismatched)} shape mismatches: '
                            + '; '.join(mismatched[:8]))
        if missing:
            problems.append(f'{len(missing)} keys missing from the '
                            f'checkpoint: {_describe(missing)}')
        if unexpected:
            problems.append(f'{len(unexpected)} unexpected keys in the '
                            f'checkpoint: {_describe(unexpected)}')
        raise ValueError(
            f'checkpoint {checkpoint!r} does not match this {name} (wrong '
            f'architecture or arch/embed_dims/depths/window_size?): '
            + ' | '.join(problems))
    result = model.load_state_dict(
        {k: v for k, v in state.items() if k in own}, strict=False)
    if result.missing_keys:
        logger.info(f'{name}: initialised from scratch (not in '
                    f'{checkpoint}): {_describe(result.missing_keys)}')
    logger.info(f'{name}: loaded {len(state)} tensors from {checkpoint}')
    return state
