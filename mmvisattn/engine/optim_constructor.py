"""Layer-wise learning-rate decay for plain (non-hierarchical) transformer
backbones such as TNT, as ViTDet and BEiT fine-tune them: block ``i`` of
``L`` trains at ``lr * rate ** (L - i)``, the embeddings at
``lr * rate ** (L + 1)``, everything after the last block (pyramid, neck,
heads) at ``lr``; norms, position embeddings and the class token get no
weight decay."""
from typing import List

import torch.nn as nn
from mmengine.optim import DefaultOptimWrapperConstructor
from torch.nn.modules.batchnorm import _BatchNorm

from mmvisattn.registry import OPTIM_WRAPPER_CONSTRUCTORS

EMBEDDINGS = ('word_embed', 'word_pos', 'stem_', 'cls_token', 'sentence_pos',
              'patch_embed', 'pos_embed')
NORMS = (nn.LayerNorm, nn.GroupNorm, _BatchNorm)


def layer_id(name: str, num_layers: int, prefix: str = 'backbone.') -> int:
    """0 for the embeddings, ``i + 1`` for ``blocks.i``, ``num_layers + 1``
    for the rest of the backbone and every module outside it."""
    if not name.startswith(prefix):
        return num_layers + 1
    name = name[len(prefix):]
    if name.startswith(EMBEDDINGS):
        return 0
    if name.startswith('blocks.'):
        return int(name.split('.')[1]) + 1
    return num_layers + 1


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """``paramwise_cfg``: ``num_layers`` (the backbone's blocks, required),
    ``layer_decay_rate`` (e.g. 0.7), ``no_decay_names`` (substrings of
    parameter names without weight decay; norms never decay),
    ``backbone_prefix`` (``'backbone.'``)."""

    def add_params(self, params: List[dict], module: nn.Module,
                   prefix: str = '', is_dcn_module=None) -> None:
        cfg = self.paramwise_cfg
        if 'num_layers' not in cfg:
            raise KeyError('LayerDecayOptimWrapperConstructor needs '
                           'paramwise_cfg.num_layers (the backbone depth)')
        depth = cfg['num_layers']
        rate = cfg.get('layer_decay_rate', 1.0)
        no_decay = tuple(cfg.get('no_decay_names',
                                 ('sentence_pos', 'word_pos', 'cls_token',
                                  'pos_embed')))
        backbone = cfg.get('backbone_prefix', 'backbone.')
        norm_params = {
            id(p)
            for m in module.modules() if isinstance(m, NORMS)
            for p in m.parameters(recurse=False)
        }
        groups = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                params.append(dict(params=[param]))
                continue
            layer = layer_id(name, depth, backbone)
            decay = 0. if id(param) in norm_params or any(
                key in name for key in no_decay) else self.base_wd
            group = groups.setdefault(
                (layer, decay),
                dict(params=[], lr=self.base_lr * rate**(depth + 1 - layer),
                     weight_decay=decay))
            group['params'].append(param)
        params.extend(groups[k] for k in sorted(groups))
