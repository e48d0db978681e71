"""Swin Transformer backbone for dense prediction (Liu et al., ICCV 2021)."""
import math
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.ops import check_window
from mmvisattn.ops.symbolic import is_concrete
from mmvisattn.registry import MODELS

from ..layers import PatchEmbed, PatchMerging, SwinBlock
from ..layers.attention import CHUNK_TOKENS, SelfAttention
from ..layers.builder import part_options, resolve_part
from ..utils.swin_convert import swin_layout, swin_to_mmvisattn
from .base import (
    BlockStage,
    HierarchicalBackbone,
    another_name_for,
    check_keywords,
    read_peer_keywords,
    resolve_arch,
    resolve_convention,
)


class SwinStage(BlockStage):
    """``depth`` blocks (``block``, by default :class:`SwinBlock`)
    alternating W-MSA / SW-MSA, then optional merging."""

    def __init__(self,
                 embed_dims: int,
                 depth: int,
                 num_heads: int,
                 window_size: Union[int, Tuple[int, int]],
                 drop_path_rates: Sequence[float],
                 downsample: Optional[nn.Module] = None,
                 with_cp: bool = False,
                 block: type = SwinBlock,
                 **block_kwargs):
        super().__init__([
            block(
                embed_dims=embed_dims,
                num_heads=num_heads,
                window_size=window_size,
                shift_size=0 if i % 2 == 0 else half_window(window_size),
                drop_path_rate=drop_path_rates[i],
                with_cp=with_cp,
                **block_kwargs) for i in range(depth)
        ], downsample)


def half_window(window_size):
    """The shift of a shifted block: half the window, per side."""
    if isinstance(window_size, int):
        return window_size // 2
    return tuple(m // 2 for m in window_size)


def per_stage(owner: str, name: str, value, num_stages: int,
              pairs: bool = False, minimum: int = 1) -> tuple:
    """``value`` (one window, or one per stage) as a tuple of one window
    per stage, each checked by :func:`mmvisattn.ops.check_window`
    (``pairs``: a window may be an (h, w) pair; ``minimum``: its smallest
    side). A sequence of ``num_stages`` entries is always one per stage."""
    if isinstance(value, (tuple, list)) and len(value) == num_stages and \
            all(isinstance(v, (int, tuple, list)) for v in value):
        return tuple(check_window(v, owner, f'{name}[{i}]', pairs, minimum)
                     for i, v in enumerate(value))
    try:
        return (check_window(value, owner, name, pairs, minimum),
                ) * num_stages
    except ValueError as e:
        raise ValueError(f'{e}, or one of them per stage ({num_stages})'
                         ) from None


def stage_windows(owner: str, window_size, window_sizes,
                  num_stages: int) -> tuple:
    """One window per stage, from ``window_size`` (one window: an int or an
    (h, w) pair) or ``window_sizes`` (one per stage; an int: the same for
    every stage), each checked by :func:`mmvisattn.ops.check_window`.
    mmpretrain spells one window per stage as ``window_size=[16, 16, 16,
    8]`` (its Swin V2 configs): a sequence of ``num_stages`` windows under
    ``window_size`` is read so, where it cannot be an (h, w) pair."""
    if window_sizes is not None:
        if window_size is not None:
            raise ValueError(
                f'{owner}: window_size={window_size!r} and window_sizes='
                f'{window_sizes!r}: give one window (window_size) or one '
                'per stage (window_sizes), not both')
        return per_stage(owner, 'window_sizes', window_sizes, num_stages,
                         pairs=True)
    if isinstance(window_size, (tuple, list)) and \
            len(window_size) == num_stages != 2:
        return per_stage(owner, 'window_size', window_size, num_stages,
                         pairs=True)
    try:
        return (check_window(window_size, owner), ) * num_stages
    except ValueError as e:
        raise ValueError(f'{e}; one window per stage is window_sizes='
                         f'(one per stage, {num_stages})') from None


def _stage_cfgs(owner: str, name: str, stage_cfgs, ours: dict) -> None:
    """The window of mmpretrain's ``stage_cfgs=dict(block_cfgs=dict(
    window_size=12))`` (its 384px configs); anything else in it has an
    argument of ours and is refused with its name."""
    if not stage_cfgs:
        return
    cfgs = [stage_cfgs] if isinstance(stage_cfgs, dict) else list(stage_cfgs)
    windows = set()
    for cfg in cfgs:
        block = dict(cfg.get('block_cfgs', {}))
        if set(cfg) - {'block_cfgs'} or set(block) - {'window_size'}:
            raise ValueError(
                f'{owner}: stage_cfgs={stage_cfgs!r}: only '
                "mmpretrain's block_cfgs=dict(window_size=M) is understood; "
                'give the other options as arguments (mlp_ratio, qkv_bias, '
                'drop_path_rate, norm_cfg, attn_cfg, with_cp, ...)')
        windows.add(block.get('window_size', ours['window_size']))
    if len(windows) != 1:
        raise ValueError(f'{owner}: stage_cfgs={stage_cfgs!r} gives '
                         'stages different windows; one window_size serves '
                         'all stages here')
    ours['window_size'] = windows.pop()


def _image_size(name: str, size) -> Tuple[int, int]:
    """An image size as (h, w): an int, or a tuple of one (mmseg reads
    ``(224, )`` as 224) or two ints; ``ValueError`` naming ``name``
    otherwise (mmdet and mmseg refuse a longer tuple too)."""
    if isinstance(size, int):
        return size, size
    if isinstance(size, (tuple, list)) and len(size) in (1, 2) and all(
            isinstance(s, int) for s in size):
        return tuple(size) * (3 - len(size))
    raise ValueError(f'SwinTransformer: {name}={size!r}: give an int or '
                     '(h, w)')


def _swin_arch(arch_zoo: Dict[str, dict], arch, **given):
    """``(embed_dims, depths, num_heads)`` of the preset or custom ``arch``
    with the explicit ``given`` ones (not None) over it; a custom dict may
    leave out what they give."""
    arch = resolve_arch('SwinTransformer', arch_zoo, arch,
                        ('embed_dims', 'depths', 'num_heads'),
                        require_keys=False)
    arch.update({k: v for k, v in given.items() if v is not None})
    lacking = [k for k in given if k not in arch]
    if lacking:
        raise ValueError(
            f'SwinTransformer: the custom arch {arch!r} lacks '
            f'{", ".join(lacking)}; give them in the dict or as arguments')
    depths, num_heads = tuple(arch['depths']), tuple(arch['num_heads'])
    if len(depths) != len(num_heads):
        raise ValueError(f'SwinTransformer: depths {depths} and num_heads '
                         f'{num_heads} must have the same length')
    return arch['embed_dims'], depths, num_heads


def _pretrained(owner: str, name: str, path, ours: dict) -> None:
    """mmdet's and mmseg's deprecated spelling of a ``Pretrained``
    ``init_cfg``."""
    if not isinstance(path, str):
        raise TypeError(f'{owner}: pretrained must be a path or URL, got '
                        f'{type(path).__name__}')
    if ours['init_cfg'] is not None:
        raise ValueError(f'{owner}: give pretrained or init_cfg, not both '
                         "(pretrained=PATH means init_cfg=dict(type="
                         "'Pretrained', checkpoint=PATH))")
    ours['init_cfg'] = dict(type='Pretrained', checkpoint=path)


def _patch_cfg(owner: str, name: str, cfg, ours: dict) -> None:
    if cfg:
        raise ValueError(
            f"{owner}: patch_cfg={cfg!r} (mmpretrain's PatchEmbed options) "
            'is not supported; use patch_size, in_channels and patch_norm')


def _strides(owner: str, name: str, strides, ours: dict) -> None:
    """mmdet's and mmseg's ``strides``: patches are non-overlapping and
    every merge halves the map, so only the first can differ."""
    want = (ours['patch_size'], ) + (2, ) * (ours['num_stages'] - 1)
    if tuple(strides) != want:
        raise ValueError(
            f'{owner}: strides={tuple(strides)}: patches are '
            'non-overlapping and every merge halves the map, so the '
            f'strides are (patch_size, 2, ...) = {want}; set patch_size for '
            'the first one')


def _convert_weights(owner: str, name: str, convert, ours: dict) -> None:
    """mmdet's ``convert_weights``: True converts the official layout on
    load; False says the file is already in mmdet's layout (GLIP's and
    Grounding DINO's configs). Here the layout is read from the keys on
    every load, so both load what they load in mmdet; with False a file in
    another layout is converted all the same, and the log says so."""
    ours['convert_weights'] = bool(convert)


#: mmdet's and mmseg's explicit sizes, over ``arch`` (read first: the
#: number of stages follows from them)
SWIN_ARCH_KEYWORDS = ('embed_dims', 'depths', 'num_heads')

#: mmdet's, mmseg's and mmpretrain's other keywords, read by
#: read_peer_keywords into the arguments they mean here
SWIN_PEER_KEYWORDS = dict(
    pretrained=_pretrained,
    img_size=another_name_for('pretrain_img_size', 224),  # mmpretrain
    stage_cfgs=_stage_cfgs,
    patch_cfg=_patch_cfg,
    strides=_strides,
    convert_weights=_convert_weights,
    # mmpretrain's options, as it means them
    pad_small_map=another_name_for('pad_small_map', None),
    out_after_downsample=another_name_for('out_after_downsample', False),
    interpolate_mode=another_name_for('interpolate_mode', 'bicubic'),
)


@MODELS.register_module()
class SwinTransformer(HierarchicalBackbone):
    """Swin Transformer: hierarchical ViT with shifted windows.

    Emits a feature pyramid (NCHW, strides 4/8/16/32) for FPN-style necks;
    ``out_channels`` lists the channels of the returned levels.

    Args:
        arch: ``'tiny'|'small'|'base'|'large'`` (paper, appendix A1) or a dict
            with ``embed_dims``, ``depths``, ``num_heads`` (mmdet's explicit
            ``embed_dims``/``depths``/``num_heads`` override the preset).
        in_channels: image channels.
        patch_size: patch partition size (4 in the paper).
        window_size: M, tokens per window side (default 7; 12 for 384px
            models), or an (h, w) pair for rectangular windows (window
            attention only; a square checkpoint's bias tables are resized
            bicubically on load, as timm resizes them): one window for
            every stage.
        window_sizes: one window per stage instead (each an int or an
            (h, w) pair). mmpretrain's spelling of it, ``window_size=[16,
            16, 16, 8]``, is read as this.
        mlp_ratio: MLP hidden width / C.
        out_indices: stages to output; each gets its own LayerNorm
            ``norm{i}``. Default: every stage (mmdet, mmseg), the last one
            for a model built for mmpretrain (its ``(3, )``).
        qkv_bias, qk_scale: attention projections.
        patch_norm: LayerNorm after patch embedding and in patch merging.
        drop_rate, attn_drop_rate: dropout rates.
        drop_path_rate: stochastic depth, rising linearly over all blocks.
        attn_cfg: the attention kind and its options, the paper's Tables 4
            to 6: ``type`` (``'WindowAttention'``, the default,
            ``'SlidingWindowAttention'``, ``'HaloSlidingWindowAttention'``,
            ``'PerformerAttention'``, ``'GlobalAttention'``; see
            :mod:`mmvisattn.models.layers.window_msa`), and that kind's
            options: ``chunk_tokens`` for every kind;
            ``relative_position`` and ``use_content`` for the windowed
            kinds; ``shift_mode`` (``'cyclic'``, ``'padding'``,
            ``'none'``) and ``pad_small_map`` for window attention;
            ``performer_features`` for FAVOR+.
        use_abs_pos_embed: add an absolute position embedding;
            ``pretrain_img_size`` sets its grid, resized bicubically to other
            inputs.
        act_cfg, norm_cfg: activation and norm configs (mmcv builders).
        with_cp: gradient checkpointing per block (saves memory in training).
        extra_global_block: append one Swin block with global self-attention
            (no position term) after the last stage, before its output norm:
            the HTC++ backbone of the paper's appendix A2.2. Its weights are
            ``global_block.*``, new to any classification checkpoint.
        frozen_stages: -1 trains all. mmdet's and mmseg's meaning: 0
            freezes the patch embedding (and the absolute embedding), k>0
            also stages 0..k-1 and their output norms. mmpretrain's, for a
            model built for mmpretrain: k>=0 freezes the patch embedding and
            stages 0..k, and the parameters of their output norms.
        norm_eval: keep BatchNorm layers (e.g. from a plugin) in eval mode.
        convention: see below.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH_OR_URL)`` loads an
            official release checkpoint (``model``), a checkpoint of mmdet's,
            mmseg's or mmpretrain's Swin (also whole detectors, segmentors
            and classifiers: ``backbone.`` keys) or one of ours; the layout
            is detected from the keys, relative position tables are resized
            when the window differs.
        **peer_keywords: mmdet's, mmseg's and mmpretrain's other arguments,
            with their meaning there, so that their configs work with only
            ``type`` changed (``SWIN_PEER_KEYWORDS``, read by
            :func:`~.base.read_peer_keywords`; any other keyword is a
            ``TypeError`` naming them); what only their implementation can
            do is refused with what to use instead (docs/backbones.md,
            "Peers"):

            - ``embed_dims``, ``depths``, ``num_heads``: over ``arch``;
            - ``pretrained``: ``init_cfg=dict(type='Pretrained', ...)``;
            - ``img_size``: mmpretrain's ``pretrain_img_size`` (and its
              classifiers' ``pad_small_map=False`` default);
            - ``pad_small_map``: window attention's (given to it; kinds
              without windows have nothing to pad): True pads and shifts
              every map (detection semantics, mmdet's and mmseg's); False
              leaves a map whose short side is one window unshifted (the
              official classifiers' semantics). Default True, or False with
              ``img_size`` or mmpretrain's convention;
            - ``out_after_downsample``: take stage i's output after its
              merging; ``interpolate_mode``: how the absolute embedding is
              resized (bicubic);
            - ``strides``, ``convert_weights``, ``stage_cfgs``,
              ``patch_cfg``: checked against what ours computes.

    ``convention`` says whose meaning the keywords have where mmdet's and
    mmpretrain's differ (``frozen_stages``, the defaults of ``out_indices``
    and ``pad_small_map``, initialisation without a checkpoint):
    ``'mmdet'`` or ``'mmpretrain'``; by default mmpretrain's while
    mmpretrain is the default scope (its configs), else mmdet's
    (:func:`~.base.resolve_convention`).
    """
    arch_zoo: Dict[str, dict] = {  # mmpretrain's spellings too ('t', ...)
        **dict.fromkeys(('tiny', 't'), dict(
            embed_dims=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24))),
        **dict.fromkeys(('small', 's'), dict(
            embed_dims=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24))),
        **dict.fromkeys(('base', 'b'), dict(
            embed_dims=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32))),
        **dict.fromkeys(('large', 'l'), dict(
            embed_dims=192, depths=(2, 2, 18, 2), num_heads=(6, 12, 24, 48))),
    }
    #: the peers' keywords taken besides the signature's
    peer_keywords = SWIN_ARCH_KEYWORDS + tuple(SWIN_PEER_KEYWORDS)
    #: the block and the patch merging (Swin V2 names its own)
    block = SwinBlock
    default_window_size = 7
    merging = PatchMerging

    def __init__(self,
                 arch: Union[str, dict] = 'tiny',
                 in_channels: int = 3,
                 patch_size: int = 4,
                 window_size: Union[int, Tuple[int, int], None] = None,
                 window_sizes: Optional[Sequence] = None,
                 mlp_ratio: float = 4.,
                 out_indices: Optional[Sequence[int]] = None,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 patch_norm: bool = True,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.1,
                 attn_cfg: Optional[dict] = None,
                 use_abs_pos_embed: bool = False,
                 pretrain_img_size: Union[int, Tuple[int, int]] = 224,
                 act_cfg: dict = dict(type='GELU'),
                 norm_cfg: dict = dict(type='LN'),
                 with_cp: bool = False,
                 extra_global_block: bool = False,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 convention: Optional[str] = None,
                 init_cfg: Optional[dict] = None,
                 **peer_keywords):
        owner = type(self).__name__
        check_keywords(owner, peer_keywords, self.peer_keywords)
        embed_dims, depths, num_heads = _swin_arch(
            self.arch_zoo, arch,
            **{k: peer_keywords.pop(k, None) for k in SWIN_ARCH_KEYWORDS})
        num_stages = len(depths)
        ours = read_peer_keywords(
            owner, SWIN_PEER_KEYWORDS, peer_keywords,
            dict(init_cfg=init_cfg, pretrain_img_size=pretrain_img_size,
                 window_size=window_size, patch_size=patch_size,
                 num_stages=num_stages, pad_small_map=None,
                 convert_weights=True,
                 out_after_downsample=False, interpolate_mode='bicubic'))
        super().__init__(init_cfg=ours['init_cfg'])
        self.convention = resolve_convention(owner, convention)
        img_size = peer_keywords.get('img_size')
        # mmpretrain's classifier semantics come with its meaning and with
        # its spelling img_size
        pad_small_map = ours['pad_small_map']
        if pad_small_map is None:
            pad_small_map = img_size is None and self.convention == 'mmdet'
        pretrain_hw = _image_size('pretrain_img_size' if img_size is None
                                  else 'img_size', ours['pretrain_img_size'])
        window_size = ours['window_size']
        if window_size is None and window_sizes is None:
            window_size = self.default_window_size
        windows = stage_windows(owner, window_size, window_sizes, num_stages)
        if out_indices is None:  # every stage (mmdet), the last (mmpretrain)
            out_indices = range(num_stages) if self.convention == 'mmdet' \
                else (num_stages - 1, )
        # every known layout is converted on load, whatever this says
        # (_convert_weights); False only makes a conversion worth a log line
        self.convert_weights = ours['convert_weights']

        attn_cfg = dict(attn_cfg or {})
        attn_cfg.setdefault('type', self.block.default_attention)
        attn_cls, _ = resolve_part('attn_cfg', attn_cfg, SelfAttention)
        if 'pad_small_map' in part_options(attn_cls):
            if attn_cfg.setdefault('pad_small_map',
                                   pad_small_map) != pad_small_map:
                raise ValueError(
                    f'SwinTransformer: pad_small_map={pad_small_map} and '
                    f"attn_cfg's pad_small_map={attn_cfg['pad_small_map']} "
                    'disagree; give one of them')
        self.embed_dims = embed_dims
        self.depths = depths
        self.num_heads = num_heads
        # one window (as mmdet's and mmpretrain's attribute), or one per stage
        self.window_size = windows[0] if len(set(windows)) == 1 else windows
        self.use_abs_pos_embed = use_abs_pos_embed
        self.pad_small_map = pad_small_map
        self.interpolate_mode = ours['interpolate_mode']
        self.pretrain_grid = tuple(s // patch_size for s in pretrain_hw)

        self.patch_embed = PatchEmbed(in_channels, embed_dims, patch_size,
                                      norm_cfg if patch_norm else None)
        if use_abs_pos_embed:
            # Official layout: (1, grid_h * grid_w, C).
            self.absolute_pos_embed = nn.Parameter(
                torch.zeros(1, math.prod(self.pretrain_grid), embed_dims))
        self.drop_after_pos = nn.Dropout(p=drop_rate)

        dpr = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        num_features = [embed_dims * 2**i for i in range(num_stages)]
        block_kwargs = dict(mlp_ratio=mlp_ratio, qkv_bias=qkv_bias,
                            qk_scale=qk_scale, drop_rate=drop_rate,
                            attn_drop_rate=attn_drop_rate, act_cfg=act_cfg,
                            norm_cfg=norm_cfg, with_cp=with_cp)
        stages = [
            SwinStage(
                embed_dims=num_features[i],
                depth=depths[i],
                num_heads=num_heads[i],
                window_size=windows[i],
                drop_path_rates=dpr[sum(depths[:i]):sum(depths[:i + 1])],
                downsample=self.merging(
                    num_features[i], num_features[i] * 2,
                    norm_cfg if patch_norm else None)
                if i < num_stages - 1 else None,
                block=self.block,
                attn_cfg=self.stage_attn_cfg(i, attn_cfg),
                **block_kwargs) for i in range(num_stages)
        ]
        self.build_skeleton('SwinTransformer', stages, num_features,
                            out_indices, frozen_stages, norm_eval, norm_cfg,
                            ours['out_after_downsample'])
        # the HTC++ backbone's extra block: global attention, no position
        self.global_block = SwinBlock(
            embed_dims=num_features[-1],
            num_heads=num_heads[-1],
            window_size=windows[-1],
            drop_path_rate=drop_path_rate,
            attn_cfg=dict(type='GlobalAttention',
                          chunk_tokens=attn_cfg.get('chunk_tokens',
                                                    CHUNK_TOKENS)),
            **block_kwargs) if extra_global_block else None
        self._register_load_state_dict_pre_hook(self._peer_layout)
        self._register_load_state_dict_pre_hook(self._fit_pos_embed)
        self._freeze_stages()

    def stage_attn_cfg(self, i: int, attn_cfg: dict) -> dict:
        """Stage ``i``'s ``attn_cfg`` (the same for every stage here)."""
        return attn_cfg

    def _peer_layout(self, state_dict, prefix, *args, **kwargs):
        """The one place a Swin checkpoint's layout is read and converted:
        every load (``init_cfg=Pretrained``, ``load_checkpoint``,
        ``load_from``, ``resume``, tools/test.py) passes through here.
        Whole models of mmdet's, mmseg's and mmpretrain's zoos, timm's and
        Hugging Face's state dicts hold their own layout (under
        ``backbone.`` in a whole model); the official release is ours but
        for its classifier's ``norm.``/``head.`` and derived buffers. A
        state dict in no known layout passes as it is, for the load to name
        its keys."""
        keys = [k for k in state_dict if k.startswith(prefix)]
        sub = {k[len(prefix):]: state_dict[k] for k in keys}
        layout = swin_layout(sub)
        if layout is None:
            return
        self._log_conversion(layout)
        for key in keys:
            del state_dict[key]
        for key, value in swin_to_mmvisattn(sub, layout,
                                            len(self.depths)).items():
            state_dict[prefix + key] = value

    def _fit_pos_embed(self, state_dict, prefix, *args, **kwargs):
        """The absolute position embedding in our layout and grid.

        The authors' detection/segmentation releases (and mmdet's Swin)
        store it as (1, C, H, W); ours, the classification release's and
        mmpretrain's is (1, H*W, C), a square grid when it comes as that.
        Another grid than ours (a 224 checkpoint at ``img_size=384``) is
        resized with ``interpolate_mode``, as mmpretrain resizes it."""
        key = prefix + 'absolute_pos_embed'
        pos = state_dict.get(key)
        if pos is None or not self.use_abs_pos_embed:
            return
        if pos.dim() == 4:
            grid = tuple(pos.shape[2:])
        else:
            side = math.isqrt(pos.shape[1])
            grid = (side, side) if side * side == pos.shape[1] else None
            pos = pos.transpose(1, 2).reshape(*pos.shape[::2], *grid) \
                if grid else pos
        if grid is None or pos.shape[1] != self.embed_dims:
            return  # not ours to fix: the load names the mismatch
        if grid != self.pretrain_grid:
            MMLogger.get_current_instance().info(
                f'SwinTransformer: absolute_pos_embed resized from {grid} '
                f'to {self.pretrain_grid} ({self.interpolate_mode})')
            pos = F.interpolate(pos.float(), size=self.pretrain_grid,
                                mode=self.interpolate_mode,
                                align_corners=False).to(pos.dtype)
        state_dict[key] = pos.flatten(2).transpose(1, 2)

    # ------------------------------------------------------------------ init
    def init_tokens(self):
        if self.use_abs_pos_embed:
            trunc_normal_(self.absolute_pos_embed, std=.02)

    def init_from_scratch(self):
        """The peer's initialisation without ``init_cfg``. mmdet's and
        mmseg's: every Linear and LayerNorm by the transformer init, the
        absolute embedding drawn, the relative position tables left at zero
        (their Swin never calls its attention's ``init_weights``).
        mmpretrain's: PyTorch's defaults, each part's own init (the tables
        drawn with std .02), the absolute embedding drawn."""
        if self.convention == 'mmpretrain':
            BaseModule.init_weights(self)
            self.init_tokens()
            return
        super().init_from_scratch()
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith('.relative_position_bias_table'):
                    p.zero_()

    def _log_conversion(self, layout: str) -> None:
        """mmdet's ``convert_weights=False`` promised mmdet's layout; a file
        in another one is converted all the same, and said so."""
        if not self.convert_weights and layout not in ('openmmlab',
                                                        'official'):
            MMLogger.get_current_instance().info(
                f'{type(self).__name__}: convert_weights=False, but the '
                f'checkpoint is in the {layout!r} layout, not mmdet\'s: '
                'converted from its keys')

    def new_in_pretrained(self, key: str) -> bool:
        # Output norms other than the classifier's final one, and the extra
        # global block, are new.
        out_norms = tuple(f'norm{i}.' for i in range(len(self.depths)))
        return key.startswith(out_norms + ('global_block.', ))

    def foreign_in_pretrained(self, key: str) -> bool:
        # A classifier has a final norm even if we do not output stage 4.
        return key.startswith(f'norm{len(self.depths) - 1}.')

    def frozen_parts(self):
        modules, params = super().frozen_parts()
        # mmdet and mmseg freeze the absolute embedding with the patch
        # embedding; mmpretrain leaves it trainable
        if self.use_abs_pos_embed and self.convention == 'mmdet':
            params.append(self.absolute_pos_embed)
        return modules, params

    # --------------------------------------------------------------- forward
    def _abs_pos_embed(self, hw_shape) -> torch.Tensor:
        pos = self.absolute_pos_embed
        # traced sizes (mmvisattn.ops.symbolic): always resize (bicubic to
        # the same grid is the identity), never decide in Python
        if is_concrete(*hw_shape) and self.pretrain_grid == tuple(hw_shape):
            return pos
        pos = pos.transpose(1, 2).reshape(1, -1, *self.pretrain_grid)
        pos = F.interpolate(pos, size=hw_shape, mode=self.interpolate_mode,
                            align_corners=False)
        return pos.flatten(2).transpose(1, 2)

    def embed_tokens(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.use_abs_pos_embed:
            x = x + self._abs_pos_embed(hw_shape)
        return self.drop_after_pos(x)

    def after_stage(self, i: int, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.global_block is not None and i == len(self.layers) - 1:
            x = self.global_block(x, hw_shape)
        return x
