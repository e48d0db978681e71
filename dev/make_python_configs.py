"""Writes ``mmvisattn/configs/``: the headline configs of ``configs/`` in
mmengine's pure-Python form, which a downstream project inherits through
Python's own imports, under stock mmengine and any entry point::

    from mmengine.config import read_base
    with read_base():
        from mmvisattn.configs.swin.upernet_swin_t_p4_w7_8xb2_160k_ade20k_512x512 import *

The text configs under ``configs/`` are the one source of truth. Each
Python config is that config as mmengine reads it (every ``_base_``
resolved), with our registered names (``'mmvisattn.SwinTransformer'``)
written as the classes themselves, imported at the top, so that nothing
needs ``custom_imports`` or a registry scope. Edit the text config, then
run this script again::

    python dev/make_python_configs.py           # rewrite
    python dev/make_python_configs.py --check   # exit 1 if stale

``tests/test_python_configs.py`` fails while a file is stale, and
checks that each one builds the same model as its ``mmvisattn::`` twin.
"""
import argparse
import inspect
import keyword
import math
import os
import os.path as osp
import re
import sys

from mmengine.config import Config
from mmengine.registry import Registry

import mmvisattn
import mmvisattn.datasets.transforms
import mmvisattn.registry

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
PACKAGE_CONFIGS = osp.join(ROOT, 'mmvisattn', 'configs')

# The headline config of every table (configs/<dir>/<file>.py).
HEADLINE = {
    'swin': [
        'cascade-mask-rcnn_swin-t-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco',
        'cascade-mask-rcnn_swin-s-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco',
        'cascade-mask-rcnn_swin-b-p4-w7_fpn_giou-4conv1f_ms-crop-3x_coco',
        'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco',
        'atss_swin-t-p4-w7_fpn_ms-3x_coco',
        'sparse-rcnn_swin-t-p4-w7_fpn_300-proposals_ms-3x_coco',
        'reppoints-v2_swin-t-p4-w7_fpn_giou_ms-3x_coco',
        'htc++_swin-b-p4-w7_fpn_instaboost-ms-400-1400_6x_coco',
        'upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512',
        'upernet_swin-s-p4-w7_8xb2-160k_ade20k-512x512',
        'upernet_swin-b-p4-w7_8xb2-160k_ade20k-512x512',
        'swin-t-p4-w7_16xb64_300e_in1k',
    ],
    'swin_v2': [
        'cascade-mask-rcnn_swinv2-t-w16_fpn_giou-4conv1f_ms-crop-3x_coco',
        'cascade-mask-rcnn_swinv2-s-w16_fpn_giou-4conv1f_ms-crop-3x_coco',
        'cascade-mask-rcnn_swinv2-b-w16_fpn_giou-4conv1f_ms-crop-3x_coco',
        'upernet_swinv2-t-w16_8xb2-160k_ade20k-512x512',
        'upernet_swinv2-s-w16_8xb2-160k_ade20k-512x512',
        'upernet_swinv2-b-w16_8xb2-160k_ade20k-512x512',
    ],
    'tnt': [
        'cascade-mask-rcnn_tnt-s-p16_fpn_giou-4conv1f_ms-crop-3x_coco',
        'upernet_tnt-s-p16_8xb2-160k_ade20k-512x512',
        'tnt-s-p16_16xb64_300e_in1k',
    ],
    'rswatt': [
        'cascade-mask-rcnn_rswatt-t_fpn_giou-4conv1f_ms-crop-3x_coco',
        'cascade-mask-rcnn_r50-rswatt-c3-c5_fpn_giou-4conv1f_ms-crop-3x_coco',
        'retinanet_r50-rswatt-neck_fpn_1x_coco',
        'upernet_rswatt-t_8xb2-160k_ade20k-512x512',
        'upernet-rswatt-head_swin-t-p4-w7_8xb2-160k_ade20k-512x512',
        'rswatt-head_rswatt-t_8xb2-160k_ade20k-512x512',
        'rswatt-head_swin-t-p4-w7_8xb2-160k_ade20k-512x512',
    ],
}

# what the Python form leaves out: it imports our classes itself
DROPPED_KEYS = ('custom_imports', )


def module_name(config_name: str) -> str:
    """A Python module name for a config file name: ``htc++`` becomes
    ``htcpp``, every other run of non-identifier characters ``_``."""
    return re.sub(r'\W+', '_', config_name.replace('++', 'pp'))


def pairs():
    """(text config path, Python config path) of every headline config."""
    for folder, names in HEADLINE.items():
        for name in names:
            yield (osp.join(ROOT, 'configs', folder, f'{name}.py'),
                   osp.join(PACKAGE_CONFIGS, folder,
                            f'{module_name(name)}.py'))


class _ClassName:
    """Stands for a class in the written text: its bare name."""

    def __init__(self, cls):
        self.cls = cls

    def __str__(self):
        return self.cls.__name__

    __repr__ = __str__


def _registries():
    """Every registry of the ``mmvisattn`` scope (the data transforms keep
    theirs beside them)."""
    return [value for module in (mmvisattn.registry,
                                 mmvisattn.datasets.transforms)
            for value in vars(module).values() if isinstance(value, Registry)]


def _our_class(name: str):
    """The class registered as ``mmvisattn.<name>``, or None."""
    for registry in _registries():
        cls = registry.get(name)
        if inspect.isclass(cls):
            return cls
    return None


def _classes_for_names(node, used: dict):
    """``node`` with every ``'mmvisattn.<Name>'`` string that names a
    registered class replaced by that class (collected in ``used``)."""
    if isinstance(node, dict):
        return {k: _classes_for_names(v, used) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_classes_for_names(v, used) for v in node)
    if isinstance(node, str) and node.startswith('mmvisattn.'):
        cls = _our_class(node[len('mmvisattn.'):])
        if cls is None:
            raise ValueError(f'{node!r} names no class of mmvisattn\'s '
                             'registries')
        used[cls.__name__] = cls
        return _ClassName(cls)
    return node


WIDTH = 79


def _scalar(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


def _format(value, indent: int, lead: int = 0) -> str:
    """``value`` as Python source at ``indent``; on one line where it fits in
    :data:`WIDTH` after ``lead`` characters, else one item per line."""
    if isinstance(value, dict):
        named = all(isinstance(k, str) and k.isidentifier()
                    and not keyword.iskeyword(k) for k in value)
        items = [(f'{k}=' if named else f'{k!r}: ', v)
                 for k, v in value.items()]
        opening, closing = ('dict(', ')') if named else ('{', '}')
    elif isinstance(value, (list, tuple)):
        items = [('', v) for v in value]
        opening, closing = ('[', ']') if isinstance(value, list) else \
            ('(', ',)' if len(value) == 1 else ')')
    else:
        return _scalar(value)
    inline = opening + ', '.join(
        key + _format(v, 0, WIDTH) for key, v in items) + closing
    if '\n' not in inline and indent + lead + len(inline) <= WIDTH:
        return inline
    if isinstance(value, tuple) and len(value) == 1:
        closing = ')'
    inner = ' ' * (indent + 4)
    lines = [inner + key + _format(v, indent + 4, len(key)) + ','
             for key, v in items]
    return opening + '\n' + '\n'.join(lines) + '\n' + ' ' * indent + closing


def python_config(text_path: str) -> str:
    """The Python form of the text config ``text_path``."""
    with mmvisattn.runtime():
        cfg = Config.fromfile(text_path)
    values = {k: v for k, v in cfg.to_dict().items() if k not in DROPPED_KEYS}
    used = {}
    values = _classes_for_names(values, used)
    body = [f'{key} = {_format(value, 0, len(key) + 3)}'
            for key, value in values.items()]
    imports = sorted(f'from {cls.__module__} import {name}'
                     for name, cls in used.items())
    source = osp.relpath(text_path, ROOT)
    module = 'mmvisattn.configs.{}.{}'.format(
        osp.basename(osp.dirname(text_path)),
        module_name(osp.splitext(osp.basename(text_path))[0]))
    header = [
        '# Generated by dev/make_python_configs.py from',
        f'#   {source}',
        '# (mmengine\'s pure-Python form of that config, every _base_ '
        'resolved); edit',
        '# that file and run the script again. Inherit it with',
        '#   with read_base():',
        f'#       from {module} import *',
    ]
    return '\n'.join(header + imports + [''] + body) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--check', action='store_true',
                        help='write nothing; exit 1 if a file is stale')
    args = parser.parse_args(argv)
    stale = []
    for folder in ('', *HEADLINE):
        os.makedirs(osp.join(PACKAGE_CONFIGS, folder), exist_ok=True)
        init = osp.join(PACKAGE_CONFIGS, folder, '__init__.py')
        if not osp.exists(init):
            open(init, 'w').close()
    for text_path, python_path in pairs():
        text = python_config(text_path)
        current = None
        if osp.exists(python_path):
            with open(python_path) as f:
                current = f.read()
        if current == text:
            continue
        stale.append(osp.relpath(python_path, ROOT))
        if not args.check:
            with open(python_path, 'w') as f:
                f.write(text)
    for name in stale:
        print(('stale: ' if args.check else 'wrote ') + name)
    return int(bool(stale) and args.check)


if __name__ == '__main__':
    sys.exit(main())
