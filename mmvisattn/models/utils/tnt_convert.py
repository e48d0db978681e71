"""TNT checkpoint layouts -> mmvisattn's :class:`TNT` keys.

* ``official`` -- huawei-noah's release (``outer_pos``, ``inner_pos``,
  ``patch_embed.proj``, ``blocks.N.inner_attn.qk``, ``outer_tokens``...);
* ``timm`` -- timm's ``tnt_*`` (``patch_pos``, ``pixel_pos``,
  ``blocks.N.attn_in.qk`` / ``.v``, ``mlp_in.fc1``...), legacy or not;
* ``mmpretrain`` -- mmpretrain's ``TNT`` (``layers.N.inner_block.attn.attn
  .in_proj_weight``, ``ffn.layers.0.0``, ``projection``...), legacy;
* ``mmvisattn`` -- ours.

Attention weights become one ``qkv`` (timm's ``qk`` and ``v`` concatenated;
mmpretrain's packed ``in_proj`` as is); MLPs become ``mlp.fc1`` /
``mlp.fc2`` (the release names). Classifier heads keep their keys under
``head.``.
"""
import re
from collections import OrderedDict
from typing import Dict

import torch

# the official names, renamed to timm's (timm's own checkpoint filter)
_OFFICIAL_TO_TIMM = [
    ('outer_pos', 'patch_pos'), ('inner_pos', 'pixel_pos'),
    ('patch_embed', 'pixel_embed'), ('proj_norm1', 'norm1_proj'),
    ('proj_norm2', 'norm2_proj'), ('inner_norm1', 'norm_in'),
    ('inner_attn', 'attn_in'), ('inner_norm2', 'norm_mlp_in'),
    ('inner_mlp', 'mlp_in'), ('outer_norm1', 'norm_out'),
    ('outer_attn', 'attn_out'), ('outer_norm2', 'norm_mlp'),
    ('outer_mlp', 'mlp')
]
_TIMM_TOP = {
    'pixel_embed.proj': 'word_embed', 'pixel_pos': 'word_pos',
    'norm1_proj': 'stem_norm1', 'proj': 'stem_proj',
    'norm2_proj': 'stem_norm2', 'patch_pos': 'sentence_pos',
    'cls_token': 'cls_token', 'norm': 'norm', 'head': 'head'
}
_TIMM_BLOCK = {
    'norm_in': 'inner.norm1', 'attn_in.proj': 'inner.attn.proj',
    'norm_mlp_in': 'inner.norm2', 'mlp_in.fc1': 'inner.mlp.fc1',
    'mlp_in.fc2': 'inner.mlp.fc2', 'norm1_proj': 'word_to_sentence.norm1',
    'proj': 'word_to_sentence.proj', 'norm2_proj': 'word_to_sentence.norm2',
    'norm_out': 'outer.norm1', 'attn_out.proj': 'outer.attn.proj',
    'norm_mlp': 'outer.norm2', 'mlp.fc1': 'outer.mlp.fc1',
    'mlp.fc2': 'outer.mlp.fc2', 'se_layer': 'outer.mlp_extra'
}
_MMPRETRAIN_TOP = {
    'pixel_embed.proj': 'word_embed', 'pixel_pos': 'word_pos',
    'norm1_proj': 'stem_norm1', 'projection': 'stem_proj',
    'norm2_proj': 'stem_norm2', 'patch_pos': 'sentence_pos',
    'cls_token': 'cls_token', 'norm': 'norm'
}
_MMPRETRAIN_BLOCK = {
    'norm_proj': 'word_to_sentence.norm1',
    'projection': 'word_to_sentence.proj'
}
_MMPRETRAIN_SUB = {
    'norm_attn': 'norm1', 'attn.attn.in_proj_weight': 'attn.qkv.weight',
    'attn.attn.in_proj_bias': 'attn.qkv.bias',
    'attn.attn.out_proj': 'attn.proj', 'norm_ffn': 'norm2',
    'ffn.layers.0.0': 'mlp.fc1', 'ffn.layers.1': 'mlp.fc2'
}


def detect_tnt_layout(state: Dict[str, torch.Tensor]) -> str:
    keys = set(state)
    if 'sentence_pos' in keys:
        return 'mmvisattn'
    if any(k.startswith('layers.') and '.inner_block.' in k for k in keys):
        return 'mmpretrain'
    if 'outer_pos' in keys or any('.inner_attn.' in k for k in keys):
        return 'official'
    if 'patch_pos' in keys and any('.attn_in.' in k for k in keys):
        return 'timm'
    raise ValueError('not a TNT checkpoint (none of sentence_pos, '
                     'outer_pos, patch_pos + attn_in, layers.N.inner_block): '
                     f'keys start with {sorted(keys)[:6]}')


def _rename(key: str, table: Dict[str, str]) -> str:
    for old, new in table.items():
        if key == old or key.startswith(old + '.'):
            return new + key[len(old):]
    return None


def _qk_v_to_qkv(state: dict) -> dict:
    """timm's ``qk`` (q then k) and ``v`` linears -> one ``qkv``."""
    out = OrderedDict()
    for key, value in state.items():
        m = re.match(r'(.*attn_(?:in|out))\.(qk|v)\.(weight|bias)$', key)
        if not m:
            out[key] = value
            continue
        prefix, part, kind = m.groups()
        if part == 'v':
            continue
        v = state.get(f'{prefix}.v.{kind}')
        if v is None:
            raise ValueError(f'{key} has no matching {prefix}.v.{kind}')
        out[f'{prefix}.qkv.{kind}'] = torch.cat([value, v], 0)
    return out


def tnt_timm_to_mmvisattn(state: Dict[str, torch.Tensor]) -> OrderedDict:
    out = OrderedDict()
    for key, value in _qk_v_to_qkv(state).items():
        m = re.match(r'blocks\.(\d+)\.(.*)$', key)
        if m:
            rest = m.group(2).replace('attn_in.qkv', 'inner.attn.qkv')
            rest = rest.replace('attn_out.qkv', 'outer.attn.qkv')
            new = rest if rest.startswith(('inner.attn.qkv',
                                           'outer.attn.qkv')) else \
                _rename(rest, _TIMM_BLOCK)
            new = new and f'blocks.{m.group(1)}.{new}'
        else:
            new = _rename(key, _TIMM_TOP)
        if new is None:
            raise ValueError(f'unknown TNT (timm layout) key {key!r}')
        out[new] = value
    return out


def tnt_official_to_mmvisattn(state: Dict[str, torch.Tensor]) -> OrderedDict:
    renamed = OrderedDict()
    for key, value in state.items():
        if key == 'outer_tokens':  # a buffer of the official model
            continue
        for old, new in _OFFICIAL_TO_TIMM:
            key = key.replace(old, new)
        if key == 'pixel_pos' and value.dim() == 3:
            # official (1, words, inner) -> (1, inner, side, side)
            side = int(round(value.shape[1]**0.5))
            value = value.permute(0, 2, 1).reshape(1, -1, side, side)
        renamed[key] = value
    return tnt_timm_to_mmvisattn(renamed)


def tnt_mmpretrain_to_mmvisattn(state: Dict[str, torch.Tensor]
                                ) -> OrderedDict:
    out = OrderedDict()
    for key, value in state.items():
        m = re.match(r'layers\.(\d+)\.(.*)$', key)
        if m:
            rest = m.group(2)
            sub = re.match(r'(inner|outer)_block\.(.*)$', rest)
            if sub:
                new = _rename(sub.group(2), _MMPRETRAIN_SUB)
                new = new and f'{sub.group(1)}.{new}'
            else:
                new = _rename(rest, _MMPRETRAIN_BLOCK)
            new = new and f'blocks.{m.group(1)}.{new}'
        elif key.startswith('head.'):
            new = key
        else:
            new = _rename(key, _MMPRETRAIN_TOP)
        if new is None:
            raise ValueError(f'unknown TNT (mmpretrain layout) key {key!r}')
        out[new] = value
    return out


def tnt_any_to_mmvisattn(state: Dict[str, torch.Tensor]) -> OrderedDict:
    """Any supported TNT layout -> ours (see the module doc)."""
    layout = detect_tnt_layout(state)
    return dict(
        mmvisattn=OrderedDict,
        timm=tnt_timm_to_mmvisattn,
        official=tnt_official_to_mmvisattn,
        mmpretrain=tnt_mmpretrain_to_mmvisattn)[layout](state)
