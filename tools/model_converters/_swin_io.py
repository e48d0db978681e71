"""Reading Swin checkpoints for the converters; errors name the file."""
import os.path as osp
from collections import OrderedDict

import torch

from mmvisattn.checkpoint import read_weights
from mmvisattn.models.utils import (
    count_swin_stages,
    detect_swin_layout,
    extract_state_dict,
)

TRUST_FILE_HELP = (
    'unpickle SRC fully (torch.load weights_only=False) instead of the safe '
    'loader: only for a file you trust, e.g. a timm train.py checkpoint, '
    'which pickles its argparse.Namespace')


def read_raw_checkpoint(path: str, trust_file: bool = False) -> dict:
    """A local file, URL or Hugging Face ``save_pretrained`` folder, read as
    a backbone's ``init_cfg`` reads it (``mmvisattn.checkpoint.read_weights``:
    ``.safetensors`` and ``.bin``, sharded or not); ``trust_file`` unpickles
    a torch file fully instead of through the safe loader."""
    if trust_file and not osp.isdir(path) and \
            not path.endswith(('.safetensors', '.json')):
        return torch.load(path, map_location='cpu', weights_only=False)
    return read_weights(path)


def read_swin_state(path: str, trust_file: bool = False,
                    with_rest: bool = False):
    """``(layout, num_stages, backbone state)`` of a Swin checkpoint file,
    and with ``with_rest`` the whole model's other tensors (neck, heads:
    keys outside ``backbone.``; empty for a backbone-only file).

    Exits with a message naming ``path`` (and a few of its keys) when the
    file cannot be read or holds no Swin Transformer.
    """
    try:
        raw = read_raw_checkpoint(path, trust_file)
    except Exception as err:  # any reader's error: name the file first
        raise SystemExit(f'error: cannot read {path!r} as a checkpoint: '
                         f'{type(err).__name__}: {err}')
    try:
        state = extract_state_dict(raw)
        layout = detect_swin_layout(state)
    except (TypeError, ValueError) as err:
        raise SystemExit(f'error: {path!r} is not a Swin checkpoint: {err}')
    tensors = OrderedDict(
        (k, v) for k, v in state.items() if isinstance(v, torch.Tensor))
    if not with_rest:
        return layout, count_swin_stages(tensors), tensors
    whole = extract_state_dict(raw, prefix=None)
    rest = OrderedDict(
        (k, v) for k, v in whole.items()
        if isinstance(v, torch.Tensor) and not k.startswith('backbone.'))
    if len(rest) == len(whole):  # a backbone-only file
        rest = OrderedDict()
    return layout, count_swin_stages(tensors), tensors, rest
