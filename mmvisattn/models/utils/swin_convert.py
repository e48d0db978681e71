"""Key mapping between the Swin checkpoint layouts in circulation and ours.

Ours is the official release layout: the classification release's names,
with one norm per output (``norm{i}``; the classifier's final ``norm``
becomes ``norm3``) exactly as the authors' detection and segmentation
releases (Swin-Transformer-Object-Detection / -Semantic-Segmentation) name
them, so their whole checkpoints load as they are.
mmdet, mmseg and mmpretrain share another layout (``stages``, ``w_msa``,
``ffn``, ``projection``, patch merging in ``nn.Unfold`` order).
timm >= 0.9 keeps the official names but opens each stage i > 0 with the
patch merging that the official model closes stage i - 1 with, and calls
the classifier ``head.fc`` (its merging order equals the official one).
Hugging Face transformers' ``SwinModel`` / ``Swinv2Model`` (and their
``ForImageClassification`` and ``Backbone`` wrappers) spell every module
in BERT's words (``attention.self.query``, ``layernorm_before``,
``intermediate.dense``), keep q, k and v apart and merge at the end of a
stage in the official order.
"""
import math
import re
from collections import OrderedDict
from typing import Dict, Optional, Sequence

import torch

from mmvisattn.ops import relative_position_index

# Buffers derived from the window (its relative offsets, V2's log-spaced
# coordinates, the official block's shift mask): rebuilt, never loaded.
# Every layout's conversion drops them here, the one place they are dropped.
_DERIVED = re.compile(r'(relative_position_index|relative_coords_table|'
                      r'attn_mask)$')


def drop_derived_buffers(state_dict: Dict[str, torch.Tensor]
                         ) -> 'OrderedDict[str, torch.Tensor]':
    """Without the buffers every Swin rebuilds itself (index, masks)."""
    return OrderedDict(
        (k, v) for k, v in state_dict.items() if not _DERIVED.search(k))


def _has_official_block_names(state_dict: Dict[str, torch.Tensor]) -> bool:
    """``mlp.fc1``: shared by the official release and timm."""
    return any('.mlp.fc1.' in k for k in state_dict)


_DOWNSAMPLE_KEY = re.compile(r'^layers\.(\d+)\.downsample\.')


def _downsample_stages(state_dict: Dict[str, torch.Tensor]) -> set:
    """Indices ``i`` of the ``layers.{i}.downsample.*`` keys."""
    return {
        int(m.group(1))
        for m in map(_DOWNSAMPLE_KEY.match, state_dict) if m
    }


def is_timm_swin(state_dict: Dict[str, torch.Tensor]) -> bool:
    """timm >= 0.9 layout: official names, merging at the start of a stage.

    Decided by structure, not by the head (headless checkpoints exist): the
    official model merges after stages 0..n-2, timm before stages 1..n-1, so
    only the official one has ``layers.0.downsample``. Without any merging
    (a one-stage model) only timm's ``head.fc`` tells them apart.
    """
    if not _has_official_block_names(state_dict):
        return False
    stages = _downsample_stages(state_dict)
    if stages:
        return 0 not in stages
    return any(k.startswith('head.fc.') for k in state_dict)


def is_official_swin(state_dict: Dict[str, torch.Tensor]) -> bool:
    """microsoft/Swin-Transformer release layout (also timm < 0.9)."""
    return _has_official_block_names(state_dict) and \
        not is_timm_swin(state_dict)


def swin_official_to_mmvisattn(state_dict: Dict[str, torch.Tensor],
                               num_stages: int = 4
                               ) -> 'OrderedDict[str, torch.Tensor]':
    """Official classification checkpoint -> our backbone keys (head dropped)."""
    out = OrderedDict()
    for key, value in drop_derived_buffers(state_dict).items():
        if key.startswith('head.'):
            continue
        if key.startswith('norm.'):
            key = f'norm{num_stages - 1}.' + key[len('norm.'):]
        out[key] = value
    return out


def swin_to_official(state_dict: Dict[str, torch.Tensor],
                     num_stages: int = 4) -> 'OrderedDict[str, torch.Tensor]':
    """Our backbone keys -> official layout (inverse of the above, no head)."""
    out = OrderedDict()
    last = f'norm{num_stages - 1}.'
    for key, value in state_dict.items():
        if key.startswith(last):
            key = 'norm.' + key[len(last):]
        elif re.match(r'norm\d+\.', key):
            continue  # extra output norms have no official counterpart
        out[key] = value
    return out


def swin_to_mmdet(state_dict: Dict[str, torch.Tensor],
                  num_stages: int = 4) -> 'OrderedDict[str, torch.Tensor]':
    """Our backbone keys -> mmdet 3.x ``SwinTransformer`` keys.

    Goes through the official layout and mmdet's own ``swin_converter`` (which
    also reorders the patch-merging weights into ``nn.Unfold`` order), so a
    comparison against mmdet tests our layout against theirs, not against a
    mapping of our own.
    """
    from mmdet.models.backbones.swin import swin_converter
    converted = swin_converter(swin_to_official(state_dict, num_stages))
    out = OrderedDict()
    for key, value in converted.items():
        key = key[len('backbone.'):]
        if not key.startswith('norm.'):
            out[key] = value
    for key, value in state_dict.items():  # output norms keep their names
        if re.match(r'norm\d+\.', key):
            out[key] = value
    return out


# mmdet/mmseg/mmpretrain merge 2x2 patches with nn.Unfold, whose channel
# order swaps the 2nd and 3rd of the four neighbours; the swap is its own
# inverse.
_UNFOLD_ORDER = [0, 2, 1, 3]


def _unfold_to_official_reduction(weight: torch.Tensor) -> torch.Tensor:
    out_ch, in_ch = weight.shape
    weight = weight.reshape(out_ch, in_ch // 4, 4).transpose(1, 2)
    return weight[:, _UNFOLD_ORDER, :].reshape(out_ch, in_ch)


def _unfold_to_official_norm(param: torch.Tensor) -> torch.Tensor:
    ch = param.shape[0]
    param = param.reshape(ch // 4, 4).transpose(0, 1)
    return param[_UNFOLD_ORDER, :].reshape(ch)


def is_openmmlab_swin(state_dict: Dict[str, torch.Tensor]) -> bool:
    """The layout of mmdet's, mmseg's and mmpretrain's SwinTransformer."""
    return any('.attn.w_msa.' in k for k in state_dict)


def swin_openmmlab_to_mmvisattn(state_dict: Dict[str, torch.Tensor],
                                num_stages: int = 4
                                ) -> 'OrderedDict[str, torch.Tensor]':
    """mmdet/mmseg/mmpretrain Swin backbone keys -> ours.

    Also takes mmcls 0.x classifiers, whose final norm is ``norm`` (not
    ``norm{num_stages - 1}``) and which stored ``attn_mask`` buffers, and
    mmpretrain's ``SwinTransformerV2``, whose stages i > 0 open with the
    merging (moved to the end of stage i - 1, as timm's) and whose merging
    normalises its output (a norm in no neighbour order).
    """
    v2 = any(k.endswith('.logit_scale') for k in state_dict)
    out = OrderedDict()
    for key, value in drop_derived_buffers(state_dict).items():
        if key.startswith('head.'):
            continue
        key = key.replace('patch_embed.projection.', 'patch_embed.proj.')
        key = key.replace('.attn.w_msa.', '.attn.')
        key = key.replace('.ffn.layers.0.0.', '.mlp.fc1.')
        key = key.replace('.ffn.layers.1.', '.mlp.fc2.')
        if key.startswith('stages.'):
            key = 'layers.' + key[len('stages.'):]
            if v2:
                key = _shift_downsample(key, -1)
        elif key.startswith('norm.'):
            key = f'norm{num_stages - 1}.' + key[len('norm.'):]
        if '.downsample.reduction.' in key:
            value = _unfold_to_official_reduction(value)
        elif '.downsample.norm.' in key and not v2:
            value = _unfold_to_official_norm(value)
        out[key] = value
    return out


def _shift_downsample(key: str, offset: int) -> str:
    """``layers.{i}.downsample.*`` -> ``layers.{i + offset}.downsample.*``."""
    return _DOWNSAMPLE_KEY.sub(
        lambda m: f'layers.{int(m.group(1)) + offset}.downsample.', key)


def swin_timm_to_mmvisattn(state_dict: Dict[str, torch.Tensor],
                           num_stages: int = 4
                           ) -> 'OrderedDict[str, torch.Tensor]':
    """timm >= 0.9 Swin keys -> ours (head dropped).

    The inverse of timm's own ``checkpoint_filter_fn``: move each patch
    merging back to the end of the previous stage, then it is the official
    layout. No weight is reordered: timm merges the 2x2 neighbours in the
    official order.
    """
    official = OrderedDict(
        (_shift_downsample(k, -1), v) for k, v in state_dict.items())
    return swin_official_to_mmvisattn(official, num_stages)


# Hugging Face: the model under ``swin.`` / ``swinv2.`` in its classifier
# and SwinBackbone wrappers, bare in a saved SwinModel / Swinv2Model.
_HF_WRAPPER = re.compile(r'^(swin|swinv2)\.')
_HF_BLOCK = re.compile(r'^encoder\.layers\.(\d+)\.blocks\.(\d+)\.(.*)$')
_HF_BLOCK_PARTS = (  # HF name inside a block -> official name
    ('layernorm_before.', 'norm1.'),
    ('layernorm_after.', 'norm2.'),
    ('attention.output.dense.', 'attn.proj.'),
    ('intermediate.dense.', 'mlp.fc1.'),
    ('output.dense.', 'mlp.fc2.'),
    ('attention.self.continuous_position_bias_mlp.', 'attn.cpb_mlp.'),
    ('attention.self.', 'attn.'),  # logit_scale, relative_position_*
)
_HF_TOP = (
    ('embeddings.patch_embeddings.projection.', 'patch_embed.proj.'),
    ('embeddings.norm.', 'patch_embed.norm.'),
    ('embeddings.position_embeddings', 'absolute_pos_embed'),
    ('layernorm.', 'norm.'),
)
_HF_DROPPED = re.compile(
    r'^(classifier\.|pooler\.|decoder\.|embeddings\.mask_token$)')


def is_hf_swin(state_dict: Dict[str, torch.Tensor]) -> bool:
    """Hugging Face transformers' Swin / Swin V2 layout."""
    return any('.attention.self.query.' in k for k in state_dict) and \
        any('embeddings.patch_embeddings.' in k for k in state_dict)


def _rename(key: str, pairs) -> str:
    for old, new in pairs:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def swin_hf_to_official(state_dict: Dict[str, torch.Tensor]
                        ) -> 'OrderedDict[str, torch.Tensor]':
    """Hugging Face Swin / Swin V2 keys -> the official release's.

    q, k and v are concatenated into ``qkv``; V1's three biases into
    ``qkv.bias``, V2's query and value biases become ``q_bias`` and
    ``v_bias`` (V2 has no key bias). SwinBackbone's per-stage output norms
    ``hidden_states_norms.stage{k}`` are our ``norm{k-1}``; heads and the
    masked-image-modelling parts are dropped.
    """
    out, qkv = OrderedDict(), {}
    for key, value in drop_derived_buffers(state_dict).items():
        key = _HF_WRAPPER.sub('', key)
        if _HF_DROPPED.match(key):
            continue
        norm = re.match(r'^hidden_states_norms\.stage(\d+)\.(.*)$', key)
        block = _HF_BLOCK.match(key)
        if norm:
            key = f'norm{int(norm.group(1)) - 1}.{norm.group(2)}'
        elif block:
            stage, index, rest = block.groups()
            head = f'layers.{stage}.blocks.{index}.'
            projection = re.match(
                r'^attention\.self\.(query|key|value)\.(weight|bias)$', rest)
            if projection:
                qkv.setdefault(head, {})[projection.groups()] = value
                continue
            key = head + _rename(rest, _HF_BLOCK_PARTS)
        elif key.startswith('encoder.layers.'):  # downsample: same order
            key = key[len('encoder.'):]
        else:
            key = _rename(key, _HF_TOP)
        out[key] = value
    for head, parts in qkv.items():
        out[head + 'attn.qkv.weight'] = torch.cat(
            [parts[(name, 'weight')] for name in ('query', 'key', 'value')])
        if ('key', 'bias') in parts:  # V1
            out[head + 'attn.qkv.bias'] = torch.cat(
                [parts[(name, 'bias')] for name in ('query', 'key', 'value')])
        elif ('query', 'bias') in parts:  # V2
            out[head + 'attn.q_bias'] = parts[('query', 'bias')]
            out[head + 'attn.v_bias'] = parts[('value', 'bias')]
    return out


def swin_hf_to_mmvisattn(state_dict: Dict[str, torch.Tensor],
                         num_stages: int = 4
                         ) -> 'OrderedDict[str, torch.Tensor]':
    """Hugging Face Swin / Swin V2 keys -> ours (head dropped)."""
    official = swin_hf_to_official(state_dict)
    out_norms = OrderedDict((k, official.pop(k)) for k in list(official)
                            if re.match(r'norm\d+\.', k))
    out = swin_official_to_mmvisattn(official, num_stages)
    out.update(out_norms)  # SwinBackbone's: already ours
    return out


def swin_to_hf(state_dict: Dict[str, torch.Tensor],
               num_stages: int = 4) -> 'OrderedDict[str, torch.Tensor]':
    """Our backbone keys -> a Hugging Face ``SwinModel`` / ``Swinv2Model``
    state dict (its ``save_pretrained`` layout, no wrapper prefix).

    The last output norm is the model's final ``layernorm``; the others
    have no counterpart in ``SwinModel`` and are dropped, as for the
    official layout. V1's ``relative_position_index``, a stored buffer
    there, is written (a square window's).
    """
    out = OrderedDict()
    top = [(new, old) for old, new in _HF_TOP]
    block_parts = [(new, old) for old, new in _HF_BLOCK_PARTS]
    for key, value in swin_to_official(state_dict, num_stages).items():
        block = re.match(r'^layers\.(\d+)\.blocks\.(\d+)\.(.*)$', key)
        if not block:
            out['encoder.' + key if key.startswith('layers.')
                else _rename(key, top)] = value
            continue
        stage, index, rest = block.groups()
        head = f'encoder.layers.{stage}.blocks.{index}.attention.self.'
        if rest in ('attn.qkv.weight', 'attn.qkv.bias'):
            field = rest.rsplit('.', 1)[1]
            for name, part in zip(('query', 'key', 'value'),
                                  value.chunk(3)):
                out[f'{head}{name}.{field}'] = part
        elif rest in ('attn.q_bias', 'attn.v_bias'):
            out[head + ('query' if rest == 'attn.q_bias' else 'value')
                + '.bias'] = value
        else:
            out[f'encoder.layers.{stage}.blocks.{index}.'
                + _rename(rest, block_parts)] = value
        if rest == 'attn.relative_position_bias_table':
            # V1's index is a persistent buffer in SwinModel: written so
            # that from_pretrained finds every key it expects
            side = round(math.sqrt(value.shape[0]))
            out[head + 'relative_position_index'] = relative_position_index(
                (side + 1) // 2)
    return out


def hf_swin_config(state_dict: Dict[str, torch.Tensor],
                   image_size: Optional[int] = None,
                   window_size: Optional[int] = None,
                   pretrained_window_sizes: Optional[Sequence[int]] = None
                   ) -> dict:
    """The ``config.json`` of a Hugging Face ``SwinModel`` /
    ``Swinv2Model`` holding our backbone ``state_dict``, read off the
    weights. V1's window is the bias table's; V2 has no table, so its
    ``window_size`` must be given. ``image_size`` defaults to the release
    sizes, 224 (V1) and 256 (V2); it matters to Hugging Face's model,
    which shrinks a window larger than a stage's map built for that size.
    """
    v2 = any(k.endswith('.logit_scale') for k in state_dict)
    proj = state_dict['patch_embed.proj.weight']
    embed_dim, num_channels, patch_size = proj.shape[:3]
    depths = [0] * count_swin_stages(state_dict)
    for key in state_dict:
        block = re.match(r'^layers\.(\d+)\.blocks\.(\d+)\.norm1\.weight$',
                         key)
        if block:
            depths[int(block.group(1))] += 1
    if v2:
        heads_of = [state_dict[f'layers.{i}.blocks.0.attn.cpb_mlp.2.weight']
                    .shape[0] for i in range(len(depths))]
        if window_size is None:
            raise ValueError('Swin V2 weights do not tell the window size '
                             '(no bias table): give window_size')
    else:
        tables = [state_dict[f'layers.{i}.blocks.0.attn.'
                             'relative_position_bias_table']
                  for i in range(len(depths))]
        heads_of = [t.shape[1] for t in tables]
        sides = {round(math.sqrt(t.shape[0])) for t in tables}
        if len(sides) != 1 or next(iter(sides)) ** 2 != tables[0].shape[0]:
            raise ValueError(
                'Hugging Face Swin has one square window for all stages; '
                f'these bias tables have {[t.shape[0] for t in tables]} rows')
        window_size = window_size or (next(iter(sides)) + 1) // 2
    hidden = state_dict['layers.0.blocks.0.mlp.fc1.weight'].shape[0]
    config = dict(
        model_type='swinv2' if v2 else 'swin',
        architectures=['Swinv2Model' if v2 else 'SwinModel'],
        image_size=image_size or (256 if v2 else 224),
        patch_size=patch_size, num_channels=num_channels,
        embed_dim=embed_dim, depths=depths, num_heads=heads_of,
        window_size=window_size, mlp_ratio=hidden / embed_dim,
        qkv_bias=any(k.endswith(('attn.qkv.bias', 'attn.q_bias'))
                     for k in state_dict),
        use_absolute_embeddings='absolute_pos_embed' in state_dict,
        hidden_act='gelu', layer_norm_eps=1e-5)
    if v2:
        config['pretrained_window_sizes'] = list(
            pretrained_window_sizes or [0] * len(depths))
    return config


# Checked in this order; each test excludes the layouts checked before it.
# 'official' is also ours (see the module doc).
_LAYOUTS = (('timm', is_timm_swin), ('official', is_official_swin),
            ('openmmlab', is_openmmlab_swin), ('huggingface', is_hf_swin))


def swin_layout(state_dict: Dict[str, torch.Tensor]) -> Optional[str]:
    """The first of ``_LAYOUTS`` that ``state_dict`` matches (``'official'``
    is also ours), or None: no known Swin layout."""
    return next((name for name, matches in _LAYOUTS
                 if matches(state_dict)), None)


def detect_swin_layout(state_dict: Dict[str, torch.Tensor]) -> str:
    """``'official'`` (the release layout, also ours), ``'timm'``,
    ``'openmmlab'`` (mmdet/mmseg/mmpretrain) or ``'huggingface'``
    (transformers); a ``ValueError`` naming a few keys otherwise.

    Expects the backbone's keys (``extract_state_dict`` strips wrappers).
    """
    layout = swin_layout(state_dict)
    if layout is not None:
        return layout
    keys = list(state_dict)
    shown = ', '.join(keys[:5]) + (f' ... ({len(keys)} keys)'
                                   if len(keys) > 5 else '')
    raise ValueError(
        'not a Swin Transformer state dict in any known layout (official, '
        f'timm, mmdet/mmseg/mmpretrain, Hugging Face); its keys: '
        f'{shown or "none"}')


_STAGE_KEY = re.compile(r'^(layers|stages)\.(\d+)\.')


def count_swin_stages(state_dict: Dict[str, torch.Tensor]) -> int:
    """Number of stages (``layers.{i}`` or ``stages.{i}``) in any layout."""
    found = {int(m.group(2)) for m in map(_STAGE_KEY.match, state_dict) if m}
    return max(found) + 1 if found else 0


def swin_any_to_mmvisattn(state_dict: Dict[str, torch.Tensor],
                          num_stages: int = 4
                          ) -> 'OrderedDict[str, torch.Tensor]':
    """Detect the layout of a Swin state dict and convert it to ours: the
    one place every Swin conversion is dispatched from."""
    layout = swin_layout(state_dict)
    if layout is not None:
        return swin_to_mmvisattn(state_dict, layout, num_stages)
    # Something else: passed on so that load_pretrained's error names the
    # file and the keys that do not fit.
    return drop_derived_buffers(state_dict)


def swin_to_mmvisattn(state_dict: Dict[str, torch.Tensor], layout: str,
                      num_stages: int = 4
                      ) -> 'OrderedDict[str, torch.Tensor]':
    """A Swin state dict in ``layout`` (:func:`swin_layout`'s answer) in
    ours."""
    return _TO_MMVISATTN[layout](state_dict, num_stages)


_TO_MMVISATTN = {
    'timm': swin_timm_to_mmvisattn,
    'official': swin_official_to_mmvisattn,
    'openmmlab': swin_openmmlab_to_mmvisattn,  # mmdet / mmseg / mmpretrain
    'huggingface': swin_hf_to_mmvisattn,  # transformers' Swin, Swin V2
}
