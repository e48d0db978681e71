"""Convert a Swin checkpoint to the official (or mmdet's) Swin layout.

    python tools/model_converters/mmvisattn2official.py SRC DST [--to mmdet]

SRC is usually one of ours (a backbone or a whole detector checkpoint), but
any layout that ``swin2mmvisattn.py`` reads works. ``--to official`` (the
default) writes ``{'model': ...}`` in microsoft/Swin-Transformer names,
without a classifier head; ``--to mmdet`` writes ``{'state_dict': ...}``
with ``backbone.``-prefixed mmdet/mmseg keys, which mmdet's
``SwinTransformer`` (``init_cfg=dict(type='Pretrained', ...)``, which keeps
only ``backbone.`` keys), mmseg's and a detector's ``load_from`` all read.
The extra output norms ``norm0..norm2`` have no official counterpart and
are dropped in the official layout. Note that the official classification
code's ``--pretrained`` loader reads ``head.bias`` unconditionally, so it
wants a head added to this backbone-only file; its detection fork (and
mmdet's ``swin_converter``) do not.
"""
import argparse

import torch

from _swin_io import TRUST_FILE_HELP, read_swin_state
from mmvisattn.models.utils import (swin_any_to_mmvisattn, swin_to_mmdet,
                                    swin_to_official)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='Swin checkpoint: file or URL')
    parser.add_argument('dst', help='output file (.pth)')
    parser.add_argument('--trust-file', action='store_true',
                        help=TRUST_FILE_HELP)
    parser.add_argument('--to', choices=('official', 'mmdet'),
                        default='official', help='target layout')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    layout, num_stages, state = read_swin_state(args.src, args.trust_file)
    ours = swin_any_to_mmvisattn(state, num_stages)
    if args.to == 'official':
        converted = swin_to_official(ours, num_stages)
        checkpoint = {'model': converted}
    else:
        converted = swin_to_mmdet(ours, num_stages)
        checkpoint = {
            'state_dict': {f'backbone.{k}': v for k, v in converted.items()},
            'meta': {'source_layout': layout, 'source': args.src}}
    torch.save(checkpoint, args.dst)
    print(f'{args.src}: {layout} layout, {num_stages} stages -> '
          f'{len(converted)} tensors in {args.to} layout saved to {args.dst}')


if __name__ == '__main__':
    main()
