"""Convert a Swin Transformer checkpoint to mmvisattn's backbone layout.

    python tools/model_converters/swin2mmvisattn.py SRC DST

SRC may be in any layout the backbone reads: the official
microsoft/Swin-Transformer release (``{'model': ...}``), timm (``swin_*``;
``pytorch_model.bin``, ``model.safetensors`` or a training checkpoint),
mmdet/mmseg/mmpretrain (also whole detectors, segmentors, classifiers) or
ours. DST is ``{'state_dict': ..., 'meta': {'source_layout': ...}}``; the
classifier head and derived buffers are dropped. A timm train.py checkpoint
pickles its ``args``, which torch's safe loader refuses: pass
``--trust-file`` if you trust the file.
"""
import argparse

import torch
from _swin_io import TRUST_FILE_HELP, read_swin_state

import mmvisattn
from mmvisattn.models.utils import swin_any_to_mmvisattn


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='Swin checkpoint: file or URL')
    parser.add_argument('dst', help='output file (.pth)')
    parser.add_argument('--trust-file', action='store_true',
                        help=TRUST_FILE_HELP)
    return parser.parse_args(argv)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    layout, num_stages, state = read_swin_state(args.src, args.trust_file)
    converted = swin_any_to_mmvisattn(state, num_stages)
    torch.save({'state_dict': converted,
                'meta': {'source_layout': layout, 'source': args.src}},
               args.dst)
    print(f'{args.src}: {layout} layout, {num_stages} stages -> '
          f'{len(converted)} tensors in mmvisattn layout saved to {args.dst}')


if __name__ == '__main__':
    main()
