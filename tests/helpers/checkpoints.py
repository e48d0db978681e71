"""Checkpoints in the layouts of the peers and the authors' releases, built
from the peers' own models, and the checks that read them back."""
import importlib
import pickle

import torch
from mmengine.config import Config

from helpers import convert_with, default_scope_guard
from mmvisattn.models.utils import swin_to_official


def official_state_dict(model, num_classes=1000):
    """Our weights in the microsoft/Swin-Transformer release layout."""
    state = swin_to_official(model.state_dict())
    for key in list(state):  # the release also stores derived buffers
        if key.endswith('relative_position_bias_table'):
            prefix = key[:-len('relative_position_bias_table')]
            state[prefix + 'relative_position_index'] = \
                model.get_submodule(prefix[:-1]).relative_position_index
    state['head.weight'] = torch.randn(num_classes, model.num_features[-1])
    state['head.bias'] = torch.zeros(num_classes)
    return state


def _unfold_to_release_reduction(w):
    """Inverse of mmdet's ``correct_unfold_reduction_order``."""
    out_ch, in_ch = w.shape
    return w.reshape(out_ch, in_ch // 4, 4).transpose(1, 2)[:, [0, 2, 1, 3],
                                                            :].reshape(
                                                                out_ch, in_ch)


def _unfold_to_release_norm(p):
    """Inverse of mmdet's ``correct_unfold_norm_order``."""
    ch = p.shape[0]
    return p.reshape(ch // 4, 4).transpose(0, 1)[[0, 2, 1, 3]].reshape(ch)


def mmdet_to_release(state):
    """mmdet 3.x Swin backbone keys (no prefix) -> the detection release's."""
    out = {}
    for key, value in state.items():
        new = key.replace('stages.', 'layers.', 1)
        new = new.replace('.attn.w_msa.', '.attn.')
        new = new.replace('.ffn.layers.0.0.', '.mlp.fc1.')
        new = new.replace('.ffn.layers.1.', '.mlp.fc2.')
        new = new.replace('patch_embed.projection.', 'patch_embed.proj.')
        if '.downsample.reduction.' in key:
            value = _unfold_to_release_reduction(value)
        elif '.downsample.norm.' in key:
            value = _unfold_to_release_norm(value)
        out[new] = value
    return out


def peer_weights(theirs, library):
    """The peer ``library``'s (mmdet's / mmseg's) model built from the
    config ``theirs`` with perturbed weights: its whole state, the backbone
    part (no prefix), that part in the authors' release layout, and the
    whole state with the backbone in the release layout."""
    registry = importlib.import_module(f'{library}.registry').MODELS
    register = importlib.import_module(
        f'{library}.utils').register_all_modules
    with default_scope_guard():
        register()
        torch.manual_seed(0)
        model = registry.build(Config.fromfile(theirs).model)
        model.init_weights()
        perturb(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    backbone = {k[len('backbone.'):]: v for k, v in state.items()
                if k.startswith('backbone.')}
    release_backbone = mmdet_to_release(backbone)
    heads = {k: v for k, v in state.items() if not k.startswith('backbone.')}
    release_state = dict(heads, **{f'backbone.{k}': v
                                   for k, v in release_backbone.items()})
    return state, backbone, release_backbone, release_state


def perturb(model):
    """No symmetric init left: a misnamed or swapped tensor shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and name.endswith('weight'):  # norms
                p.uniform_(0.5, 1.5)
            elif p.dim() == 1:  # biases
                p.normal_(0, 0.1)
            else:
                p.add_(torch.randn_like(p) * 0.02)
        for name, buf in model.named_buffers():
            if name.endswith('running_var'):
                buf.uniform_(0.5, 1.5)
            elif name.endswith('running_mean'):
                buf.normal_(0, 0.1)


def predictions(path):
    with open(path, 'rb') as f:
        return pickle.load(f)


def assert_converts_back(src, tmp, expected):
    """``mmvisattn2official.py SRC --to TO --keep-heads`` gives exactly
    ``expected[TO]`` (a state dict), every tensor, the derived buffers
    (position index, attention mask) aside, which the peers rebuild."""
    for to, want in expected.items():
        dst = str(tmp / f'back_{to}.pth')
        convert_with('mmvisattn2official.py', src, dst, '--to', to,
                     '--keep-heads')
        got = torch.load(dst, weights_only=True)['state_dict']
        want = {k: v for k, v in want.items()
                if not k.endswith(('relative_position_index', 'attn_mask'))}
        assert set(got) == set(want), (to, set(got) ^ set(want))
        for key, value in want.items():
            torch.testing.assert_close(got[key], value, rtol=0, atol=0,
                                       msg=f'{to}: {key}')


# timm's names -> the official release's (the reverse of timm's filter)
TNT_TIMM_TO_OFFICIAL = [
    ('patch_pos', 'outer_pos'), ('pixel_pos', 'inner_pos'),
    ('pixel_embed', 'patch_embed'), ('norm1_proj', 'proj_norm1'),
    ('norm2_proj', 'proj_norm2'), ('norm_mlp_in', 'inner_norm2'),
    ('norm_in', 'inner_norm1'), ('attn_in', 'inner_attn'),
    ('mlp_in', 'inner_mlp'), ('norm_out', 'outer_norm1'),
    ('attn_out', 'outer_attn'), ('norm_mlp', 'outer_norm2'),
    ('.mlp.', '.outer_mlp.')
]


def tnt_official_from_timm(state):
    out = {}
    for key, value in state.items():
        for old, new in TNT_TIMM_TO_OFFICIAL:
            key = key.replace(old, new)
        if key == 'inner_pos':  # official (1, words, inner)
            value = value.flatten(2).transpose(1, 2)
        out[key] = value
    out['outer_tokens'] = torch.zeros(1)
    return out
