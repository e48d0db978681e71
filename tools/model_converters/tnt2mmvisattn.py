"""Convert a TNT checkpoint to mmvisattn's ``TNT`` layout.

    python tools/model_converters/tnt2mmvisattn.py SRC DST [--keep-head]

SRC may be the official huawei-noah release (``tnt_s_81.5.pth.tar``), timm
(``tnt_s_patch16_224`` / ``tnt_s_legacy_patch16_224`` / ``tnt_b_*``;
``.bin``, ``.safetensors``), mmpretrain's ``TNT`` (also a whole
``ImageClassifier`` checkpoint) or ours. DST is ``{'state_dict': ...,
'meta': {'source_layout': ..., 'legacy': ...}}``; build the backbone with
that ``legacy`` value. The classifier head is dropped unless
``--keep-head`` (then under ``head.``).
"""
import argparse
from collections import OrderedDict

import torch
from _swin_io import TRUST_FILE_HELP, read_raw_checkpoint

import mmvisattn
from mmvisattn.models.utils import (
    detect_tnt_layout,
    extract_state_dict,
    tnt_any_to_mmvisattn,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='TNT checkpoint: file or URL')
    parser.add_argument('dst', help='output file (.pth)')
    parser.add_argument('--keep-head', action='store_true',
                        help='keep the ImageNet classifier under head.')
    parser.add_argument('--trust-file', action='store_true',
                        help=TRUST_FILE_HELP)
    return parser.parse_args(argv)


# every run in the scope the tools need: mmengine checkpoints under torch's
# safe loader, `mmvisattn::` configs (mmvisattn/environment.py)
@mmvisattn.runtime()
def main(argv=None):
    args = parse_args(argv)
    try:
        raw = read_raw_checkpoint(args.src, args.trust_file)
    except Exception as err:  # any reader's error: name the file first
        raise SystemExit(f'error: cannot read {args.src!r} as a checkpoint: '
                         f'{type(err).__name__}: {err}')
    try:
        state = OrderedDict((k, v) for k, v in extract_state_dict(raw).items()
                            if isinstance(v, torch.Tensor))
        layout = detect_tnt_layout(state)
        converted = tnt_any_to_mmvisattn(state)
    except (TypeError, ValueError) as err:
        raise SystemExit(f'error: {args.src!r} is not a TNT checkpoint: {err}')
    if not args.keep_head:
        converted = OrderedDict(
            (k, v) for k, v in converted.items() if not k.startswith('head.'))
    legacy = 'blocks.0.word_to_sentence.proj.bias' in converted
    torch.save({'state_dict': converted,
                'meta': {'source_layout': layout, 'legacy': legacy,
                         'source': args.src}}, args.dst)
    print(f'{args.src}: {layout} layout (legacy={legacy}) -> '
          f'{len(converted)} tensors in mmvisattn layout saved to {args.dst}')


if __name__ == '__main__':
    main()
