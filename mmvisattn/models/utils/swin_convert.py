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
"""
import re
from collections import OrderedDict
from typing import Dict

import torch

# Derived buffers of the official model: we rebuild them, never load them.
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


# Checked in this order; each test excludes the layouts checked before it.
# 'official' is also ours (see the module doc).
_LAYOUTS = (('timm', is_timm_swin), ('official', is_official_swin),
            ('openmmlab', is_openmmlab_swin))


def detect_swin_layout(state_dict: Dict[str, torch.Tensor]) -> str:
    """``'official'`` (the release layout, also ours), ``'timm'``,
    or ``'openmmlab'`` (mmdet/mmseg/mmpretrain); a ``ValueError`` naming a
    few keys otherwise.

    Expects the backbone's keys (``extract_state_dict`` strips wrappers).
    """
    for name, matches in _LAYOUTS:
        if matches(state_dict):
            return name
    keys = list(state_dict)
    shown = ', '.join(keys[:5]) + (f' ... ({len(keys)} keys)'
                                   if len(keys) > 5 else '')
    raise ValueError(
        'not a Swin Transformer state dict in any known layout (official, '
        f'timm, mmdet/mmseg/mmpretrain); its keys: '
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
    for name, matches in _LAYOUTS:
        if matches(state_dict):
            return _TO_MMVISATTN[name](state_dict, num_stages)
    # Something else: passed on so that load_pretrained's error names the
    # file and the keys that do not fit.
    return drop_derived_buffers(state_dict)


_TO_MMVISATTN = {
    'timm': swin_timm_to_mmvisattn,
    'official': swin_official_to_mmvisattn,
    'openmmlab': swin_openmmlab_to_mmvisattn,  # mmdet / mmseg / mmpretrain
}
