"""The backbone skeleton every family shares.

:func:`resolve_arch` and :func:`check_stages` make the checks every backbone
makes, so the same mistake gets the same error (type and wording) from
Swin, TNT and RSWAtt; :func:`read_peer_keywords` reads the peers'
spellings from each backbone's table; :class:`BackboneBase` holds
freezing, ``norm_eval``, init and pretrained loading; :class:`HierarchicalBackbone` is Swin's
pyramid (patch embedding, :class:`BlockStage` stages with merging, output
norms), on which Swin and RSWAtt differ only in their blocks.
"""
import functools
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmengine.logging import MMLogger
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import constant_init, trunc_normal_
from mmengine.registry import DefaultScope
from torch.nn.modules.batchnorm import _BatchNorm

from mmvisattn.checkpoint import load_pretrained


def resolve_arch(owner: str, arch_zoo: Dict[str, dict], arch,
                 keys: Sequence[str],
                 require_keys: bool = True) -> dict:
    """The preset named ``arch`` (case-insensitive) or a custom dict.

    An unknown name, a custom dict with other keys, or one without all of
    ``keys`` (when ``require_keys``) is a ``ValueError`` naming the
    backbone, the value and the choices.
    """
    if isinstance(arch, str):
        if arch.lower() not in arch_zoo:
            raise ValueError(
                f'{owner}: unknown arch {arch!r}; choose from '
                f'{sorted(arch_zoo)} or pass a dict with keys '
                f'{", ".join(keys)}')
        return dict(arch_zoo[arch.lower()])
    if not isinstance(arch, dict) or set(arch) - set(keys) or (
            require_keys and set(keys) - set(arch)):
        raise ValueError(f'{owner}: a custom arch is a dict with keys '
                         f'{", ".join(keys)}; got {arch!r}')
    return dict(arch)


#: The peers whose keyword meanings differ: ``'mmdet'`` (mmdet's and mmseg's,
#: which agree) and ``'mmpretrain'``.
CONVENTIONS = ('mmdet', 'mmpretrain')


def resolve_convention(owner: str, convention: Optional[str]) -> str:
    """Which peer's meaning the constructor's keywords have, chosen by what
    the user wrote: ``convention`` given, that one; otherwise
    ``'mmpretrain'`` while mmpretrain is the registry's default scope (every
    mmpretrain config sets ``default_scope = 'mmpretrain'``) and ``'mmdet'``
    (mmdet's and mmseg's meaning) everywhere else: plain Python calls and
    mmdet, mmseg and this project's detection and segmentation configs.
    Choosing mmpretrain's is logged, once per backbone class and process,
    with how to change it.
    """
    if convention is not None:
        if convention not in CONVENTIONS:
            raise ValueError(f'{owner}: convention={convention!r}; choose '
                             f'from {CONVENTIONS}')
        return convention
    scope = DefaultScope.get_current_instance()
    if scope is not None and scope.scope_name == 'mmpretrain':
        _log_mmpretrain_meaning(owner)
        return 'mmpretrain'
    return 'mmdet'


@functools.lru_cache(maxsize=None)
def _log_mmpretrain_meaning(owner: str) -> None:
    MMLogger.get_current_instance().info(
        f"{owner}: mmpretrain's meaning of the keywords (mmpretrain is the "
        "default scope); give convention='mmdet' for mmdet's "
        '(docs/backbones.md, "Peers")')


#: ``translate(owner, name, value, ours)``: reads a peer's keyword ``name``
#: (given as ``value``) into our arguments ``ours``, or raises naming it.
PeerKeyword = Callable[[str, str, object, dict], None]


def check_keywords(owner: str, given: Dict[str, object],
                   known: Sequence[str]) -> None:
    """A keyword neither ours nor a peer's is a ``TypeError`` that names it
    and the peers' keywords taken (ours are in the signature)."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(
            f'{owner}.__init__() got an unexpected keyword argument '
            f"{unknown[0]!r} (besides its own arguments it takes the peers' "
            f'{", ".join(sorted(known))})')


def read_peer_keywords(owner: str, table: Dict[str, PeerKeyword],
                       given: Dict[str, object], ours: dict) -> dict:
    """``ours`` with the peers' spellings in ``given`` (mmdet's, mmseg's and
    mmpretrain's keywords; None: not given) read in by ``table``, the one
    small table each backbone keeps of them."""
    ours = dict(ours)
    for name, translate in table.items():
        if given.get(name) is not None:
            translate(owner, name, given[name], ours)
    return ours


def another_name_for(ours_name: str, default) -> PeerKeyword:
    """A peer's name for our argument ``ours_name`` (default ``default``):
    its value is taken where ours keeps the default; the two disagreeing is
    a ``ValueError`` naming both."""
    def translate(owner: str, name: str, value, ours: dict) -> None:
        mine = ours[ours_name]
        if mine != default and mine != value:
            raise ValueError(f'{owner}: {ours_name}={mine} and {name}='
                             f"{value} (the peer's name) disagree; give one "
                             'of them')
        ours[ours_name] = value
    return translate


def check_stages(owner: str, num_stages: int, out_indices: Sequence[int],
                 frozen_stages: Optional[int] = None,
                 max_frozen: Optional[int] = None) -> None:
    """``out_indices`` within the stages, ``frozen_stages`` at most
    ``max_frozen`` (default: their number); ``ValueError`` naming the field
    otherwise."""
    bad = [i for i in out_indices if not 0 <= i < num_stages]
    if bad:
        raise ValueError(f'{owner}: out_indices {bad} out of range for '
                         f'{num_stages} stages (0..{num_stages - 1})')
    max_frozen = num_stages if max_frozen is None else max_frozen
    if frozen_stages is not None and frozen_stages > max_frozen:
        raise ValueError(f'{owner}: frozen_stages={frozen_stages} exceeds '
                         f'{max_frozen}, all {num_stages} stages')


class BackboneBase(BaseModule):
    """What every backbone here shares: presets and checks (above), freezing
    with ``frozen_stages``, ``norm_eval``, initialisation and pretrained
    loading through :func:`mmvisattn.checkpoint.load_pretrained`.

    One order for every backbone, kept here:

    1. build: the family's constructor, which ends by freezing its frozen
       stages (:meth:`_freeze_stages`: a DDP wrapper built before the first
       ``train()`` sees them frozen);
    2. :meth:`init_weights`: every Linear and LayerNorm by the transformer
       init, then each part's own ``init_weights`` (relative position
       tables, window predictors, position encodings), then the family's
       own tensors (:meth:`init_tokens`); a ``Pretrained`` ``init_cfg`` is
       loaded over that (what the file lacks keeps its fresh init); the
       frozen stages are frozen again;
    3. :meth:`train` keeps frozen stages and ``norm_eval`` norms in eval.

    A backbone says which modules and parameters ``frozen_stages`` freezes
    (:meth:`frozen_parts`) and which keys a pretrained file may lack or add
    (:meth:`new_in_pretrained`, :meth:`foreign_in_pretrained`); a
    checkpoint's layout is read and converted by its ``load_state_dict``
    pre-hook, the one place every way of loading passes through.
    """

    frozen_stages: int = -1
    norm_eval: bool = False
    convention: str = 'mmdet'  # whose keyword meanings: resolve_convention

    # ------------------------------------------------------------ freezing
    def frozen_parts(self) -> Tuple[List[nn.Module], List[nn.Parameter]]:
        """Modules (set to eval) and loose parameters frozen by
        ``frozen_stages``."""
        return [], []

    def _freeze_stages(self):
        if self.frozen_stages < 0:
            return
        modules, params = self.frozen_parts()
        for m in modules:
            m.eval()
            params = params + list(m.parameters())
        for p in params:
            p.requires_grad = False

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self

    # ------------------------------------------------------------- weights
    @staticmethod
    def init_transformer(module: nn.Module):
        """Linear: truncated normal (std .02), zero bias; LayerNorm: 1, 0."""
        for m in module.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                constant_init(m, 1.0, 0.)

    def init_from_scratch(self):
        """The transformer init of every Linear and LayerNorm, then each
        part's own ``init_weights`` (which may overwrite it: a window
        predictor starts at zero), then :meth:`init_tokens`."""
        self.init_transformer(self)
        # the children's own init (mmengine's recursion, without applying
        # this backbone's init_cfg: a Pretrained one is loaded by ours)
        for child in self.children():
            if hasattr(child, 'init_weights'):
                child.init_weights()
        self.init_tokens()

    def init_tokens(self):
        """The family's own tensors (class tokens, position embeddings)."""

    def new_in_pretrained(self, key: str) -> bool:
        """Keys of ours a pretrained file may lack."""
        return False

    def foreign_in_pretrained(self, key: str) -> bool:
        """Keys of a pretrained file that are not ours (e.g. a head)."""
        return False

    def init_weights(self):
        pretrained = isinstance(self.init_cfg, dict) and self.init_cfg.get(
            'type') == 'Pretrained'
        if self.init_cfg is not None and not pretrained:
            # mmengine's other init_cfg kinds, one dict or a list of them
            # (mmpretrain's TNT config gives a list), and each part's own;
            # tokens and position embeddings are drawn either way, as
            # mmpretrain draws them
            super().init_weights()
            self.init_tokens()
        else:
            self.init_from_scratch()
            if pretrained:
                self.load_pretrained(self.init_cfg['checkpoint'])
        self._freeze_stages()

    def load_pretrained(self, checkpoint: str) -> None:
        load_pretrained(
            self, checkpoint,
            allowed_missing=self.new_in_pretrained,
            allowed_unexpected=self.foreign_in_pretrained,
            logger=MMLogger.get_current_instance())


class BlockStage(BaseModule):
    """``blocks`` run in turn on (B, H*W, C) tokens of an (H, W) map, then
    the optional ``downsample`` (run by the backbone, after the stage's
    output is taken): the parameter layout ``layers.{i}.blocks.{j}`` /
    ``layers.{i}.downsample`` of the official Swin release."""

    def __init__(self, blocks: Sequence[nn.Module],
                 downsample: Optional[nn.Module] = None):
        super().__init__()
        self.blocks = ModuleList(blocks)
        self.downsample = downsample

    def forward(self, x: torch.Tensor, hw_shape: Tuple[int, int]):
        for block in self.blocks:
            x = block(x, hw_shape)
        return x


class HierarchicalBackbone(BackboneBase):
    """Swin's skeleton: patch embedding, then stages of blocks with patch
    merging between them; every stage in ``out_indices`` is returned
    through its own output norm ``norm{i}`` as an NCHW map (strides 4, 8,
    16, 32 for patch 4). Subclasses set ``patch_embed`` first (the order
    of parameters is the order optimizer states are saved in), build the
    stages' blocks and call :meth:`build_skeleton`; hooks :meth:`embed_tokens` and
    :meth:`after_stage` add what a family has beyond it."""

    def build_skeleton(self, owner: str, stages: Sequence[BlockStage],
                       num_features: Sequence[int],
                       out_indices: Sequence[int], frozen_stages: int,
                       norm_eval: bool, norm_cfg: dict,
                       out_after_downsample: bool = False):
        out_indices = tuple(out_indices)
        # mmpretrain freezes stages 0..k, so k names a stage there
        check_stages(owner, len(stages), out_indices, frozen_stages,
                     len(stages) - (self.convention == 'mmpretrain'))
        self.layers = ModuleList(stages)
        self.num_features = list(num_features)
        self.out_indices = out_indices
        # mmpretrain's option: stage i's output taken after its merging
        self.out_after_downsample = out_after_downsample
        out_features = [
            stage.downsample.out_channels
            if out_after_downsample and stage.downsample is not None else
            self.num_features[i] for i, stage in enumerate(stages)
        ]
        self.out_channels = [out_features[i] for i in out_indices]
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        for i in out_indices:
            self.add_module(f'norm{i}',
                            build_norm_layer(norm_cfg, out_features[i])[1])

    def frozen_parts(self):
        """mmdet's and mmseg's ``frozen_stages=k``: the patch embedding and
        stages 0..k-1 with their output norms; mmpretrain's (for a model
        built for mmpretrain, :func:`resolve_convention`): the patch
        embedding and stages 0..k, and the parameters of their output norms
        (which mmpretrain leaves in train mode)."""
        if self.convention == 'mmpretrain':
            stages = range(self.frozen_stages + 1)
            norms = [getattr(self, f'norm{i}') for i in stages
                     if i in self.out_indices]
            return ([self.patch_embed] + [self.layers[i] for i in stages],
                    [p for norm in norms for p in norm.parameters()])
        modules = [self.patch_embed]
        for i in range(self.frozen_stages):
            modules.append(self.layers[i])
            if i in self.out_indices:
                modules.append(getattr(self, f'norm{i}'))
        return modules, []

    def embed_tokens(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        """Tokens after the patch embedding (e.g. + position, dropout)."""
        return x

    def after_stage(self, i: int, x: torch.Tensor, hw_shape) -> torch.Tensor:
        """Tokens after stage ``i``'s blocks, before its output norm."""
        return x

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        x, hw_shape = self.patch_embed(x)
        x = self.embed_tokens(x, hw_shape)
        outs = []
        for i, stage in enumerate(self.layers):
            x = self.after_stage(i, stage(x, hw_shape), hw_shape)
            merge = stage.downsample is not None
            if merge and self.out_after_downsample:
                x, hw_shape = stage.downsample(x, hw_shape)
            if i in self.out_indices:
                out = getattr(self, f'norm{i}')(x)
                outs.append(out.view(-1, *hw_shape, out.shape[-1]).permute(
                    0, 3, 1, 2).contiguous())
            if merge and not self.out_after_downsample:
                x, hw_shape = stage.downsample(x, hw_shape)
        # a tuple: what mmdet, mmseg and mmpretrain necks all take
        return tuple(outs)
