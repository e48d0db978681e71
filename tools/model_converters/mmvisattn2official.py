"""Convert a Swin checkpoint (a backbone or a whole model) to the official
layout, to mmdet's / mmseg's / mmpretrain's or to Hugging Face's.

    python tools/model_converters/mmvisattn2official.py SRC DST \
        [--to official|mmdet|mmseg|mmpretrain|huggingface] [--keep-heads]

SRC is usually one of ours (a backbone, or a whole detector, segmentor or
classifier checkpoint), but any layout that ``swin2mmvisattn.py`` reads
works. The backbone is converted. With ``--keep-heads`` a whole model's
other weights (neck, heads) pass through unchanged, so the result loads
into the peer library's model of the same config (``load_from``,
tools/test.py); without it only the backbone is written.

* ``--to official`` (the default): a backbone (or, with ``--keep-heads``, a
  classifier) becomes ``{'model': ...}`` in microsoft/Swin-Transformer
  names (a classifier's ``head.fc`` becomes ``head``); with
  ``--keep-heads`` a detector or segmentor becomes
  ``{'state_dict': ...}`` with the backbone under ``backbone.`` in the
  layout of the authors' detection and segmentation releases (ours: the
  output norms ``norm{i}`` kept). For a backbone or classifier the extra
  output norms ``norm0..norm2`` have no official counterpart and are
  dropped.
* ``--to mmdet`` / ``mmseg`` / ``mmpretrain`` (one Swin layout, shared by the
  three): ``{'state_dict': ...}`` with ``backbone.``-prefixed keys, which
  their ``SwinTransformer`` (``init_cfg=dict(type='Pretrained', ...)``) and
  their whole models' ``load_from`` read.

* ``--to huggingface``: DST is a folder that transformers'
  ``SwinModel.from_pretrained`` / ``Swinv2Model.from_pretrained`` reads
  (``config.json`` and ``model.safetensors``); with ``--keep-heads`` a
  classifier becomes ``SwinForImageClassification`` /
  ``Swinv2ForImageClassification``. The config is read off the weights;
  Swin V2 weights do not tell their window, so give ``--window-size``
  (and ``--pretrained-window-sizes`` for a transferred model);
  ``--image-size`` (default 224 for V1, 256 for V2) is the size
  Hugging Face's model is built for.

Note that the official classification code's ``--pretrained`` loader reads
``head.bias`` unconditionally, so a backbone-only file wants a head added;
its detection fork (and mmdet's ``swin_converter``) do not.
"""
import argparse
import json
import os

import torch
from _swin_io import TRUST_FILE_HELP, read_swin_state

import mmvisattn
from mmvisattn.models.utils import (
    hf_swin_config,
    swin_any_to_mmvisattn,
    swin_to_hf,
    swin_to_mmdet,
    swin_to_official,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='Swin checkpoint: file or URL')
    parser.add_argument('dst', help='output file (.pth)')
    parser.add_argument('--trust-file', action='store_true',
                        help=TRUST_FILE_HELP)
    parser.add_argument('--to',
                        choices=('official', 'mmdet', 'mmseg', 'mmpretrain',
                                 'huggingface'),
                        default='official', help='target layout')
    parser.add_argument('--keep-heads', action='store_true',
                        help='convert a whole model: keep the weights '
                        'outside the backbone (neck, heads)')
    hf = parser.add_argument_group('--to huggingface')
    hf.add_argument('--image-size', type=int,
                    help='the size the model is built for (224 for V1, '
                    '256 for V2)')
    hf.add_argument('--window-size', type=int,
                    help='the window (required for Swin V2)')
    hf.add_argument('--pretrained-window-sizes', type=int, nargs='+',
                    help='Swin V2: the windows of the pretraining, per stage')
    return parser.parse_args(argv)


def save_huggingface(ours, rest, num_stages, args):
    """``config.json`` + ``model.safetensors`` in the folder ``args.dst``."""
    from safetensors.torch import save_file
    try:
        config = hf_swin_config(ours, args.image_size, args.window_size,
                                args.pretrained_window_sizes)
    except ValueError as err:
        raise SystemExit(f'error: {args.src!r}: {err}')
    state = swin_to_hf(ours, num_stages)
    if 'head.fc.weight' in rest:  # a classifier: SwinForImageClassification
        wrapper = config['model_type']  # 'swin' / 'swinv2'
        state = {f'{wrapper}.{k}': v for k, v in state.items()}
        state['classifier.weight'] = rest['head.fc.weight']
        state['classifier.bias'] = rest['head.fc.bias']
        classes = rest['head.fc.weight'].shape[0]
        config['architectures'] = [
            config['architectures'][0].replace('Model', 'ForImageClassification')]
        config['id2label'] = {str(i): f'LABEL_{i}' for i in range(classes)}
        config['label2id'] = {f'LABEL_{i}': i for i in range(classes)}
    elif rest:
        raise SystemExit(f'error: {args.src!r} is a detector or segmentor; '
                         'Hugging Face has Swin backbones and classifiers '
                         'only: convert without --keep-heads')
    os.makedirs(args.dst, exist_ok=True)
    with open(os.path.join(args.dst, 'config.json'), 'w') as f:
        json.dump(config, f, indent=2)
    save_file({k: v.contiguous() for k, v in state.items()},
              os.path.join(args.dst, 'model.safetensors'),
              metadata={'format': 'pt'})
    return state


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    layout, num_stages, state, rest = read_swin_state(
        args.src, args.trust_file, with_rest=True)
    ours = swin_any_to_mmvisattn(state, num_stages)
    if not args.keep_heads:
        rest = {}
    classifier = 'head.fc.weight' in rest
    if args.to == 'huggingface':
        converted = save_huggingface(ours, rest, num_stages, args)
    elif args.to == 'official' and rest and not classifier:
        # a detector / segmentor: the authors' detection and segmentation
        # releases name the backbone as we do, output norms norm{i} kept
        converted = ours
        checkpoint = {'state_dict': dict(
            {f'backbone.{k}': v for k, v in converted.items()}, **rest)}
    elif args.to == 'official':
        converted = swin_to_official(ours, num_stages)
        # mmpretrain's head.fc.* is the classification release's head.*
        head = {k.replace('head.fc.', 'head.', 1): v for k, v in rest.items()}
        checkpoint = {'model': dict(converted, **head)}
    else:
        converted = swin_to_mmdet(ours, num_stages)
        checkpoint = {
            'state_dict': dict(
                {f'backbone.{k}': v for k, v in converted.items()}, **rest),
            'meta': {'source_layout': layout, 'source': args.src}}
    if args.to != 'huggingface':
        torch.save(checkpoint, args.dst)
    whole = f' and {len(rest)} other tensors (kept)' if rest else ''
    print(f'{args.src}: {layout} layout, {num_stages} stages -> '
          f'{len(converted)} backbone tensors in {args.to} layout{whole} '
          f'saved to {args.dst}')


if __name__ == '__main__':
    main()
