"""TNT, Transformer in Transformer (Han et al., NeurIPS 2021), as a
classifier and as a dense-prediction backbone.

An image is cut into 16x16 patches ("visual sentences"); a 7x7 stride-4
conv turns each into 4x4 "visual words". Every block runs an inner
transformer over the words of each sentence, adds a projection of the words
to their sentence, then runs an outer transformer over the sentences (and
the class token). Unlike the released classifiers this one takes any input
size (bottom/right padding to the patch size, sentence position embeddings
resized bicubically to the patch grid) and can emit a 4-level pyramid
(strides 4, 8, 16, 32) for FPN or UperNet.

Two layouts exist and both load (``legacy``):

* ``legacy=False`` -- the official release (TNT-S 81.5%, TNT-B 82.9%) and
  timm's ``tnt_s_patch16_224``: the stride-4 conv runs inside each patch,
  and each block projects words to a sentence with
  ``LN(16 x inner) -> Linear (no bias) -> LN(outer)``;
* ``legacy=True`` -- the first version, mmpretrain's ``TNT`` and timm's
  ``tnt_s_legacy_patch16_224``: the conv runs over the whole image before
  the patches are cut, and each block projects with ``LN(inner) -> Linear``.
"""
import math
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_

from mmvisattn.models.layers.patch import check_images
from mmvisattn.models.layers.transformer import TransformerLayer
from mmvisattn.models.utils.tnt_convert import tnt_any_to_mmvisattn
from mmvisattn.ops.symbolic import ceil_div, is_concrete
from mmvisattn.registry import MODELS

from .base import (
    BackboneBase,
    another_name_for,
    check_keywords,
    read_peer_keywords,
    resolve_arch,
    resolve_convention,
)


class SqueezeExcite(nn.Module):
    """TNT's optional SE on the outer MLP's output: a tanh gate per channel
    from the mean over tokens (``fc``: LN, Linear, ReLU, Linear, Tanh)."""

    def __init__(self, dims: int, hidden_ratio: float = 0.25):
        super().__init__()
        hidden = int(dims * hidden_ratio)
        self.fc = nn.Sequential(
            nn.LayerNorm(dims), nn.Linear(dims, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, dims), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=1, keepdim=True)) * x


class WordsToSentence(nn.Module):
    """Projects the words of each sentence to a sentence-sized update."""

    def __init__(self, inner_dims: int, outer_dims: int, num_words: int,
                 legacy: bool, norm_cfg: dict):
        super().__init__()
        self.legacy = legacy
        if legacy:  # LN per word, Linear with bias
            self.norm1 = build_norm_layer(norm_cfg, inner_dims)[1]
            self.proj = nn.Linear(inner_dims * num_words, outer_dims)
            self.norm2 = nn.Identity()
        else:  # LN over all words, Linear without bias, LN
            self.norm1 = build_norm_layer(norm_cfg, inner_dims * num_words)[1]
            self.proj = nn.Linear(
                inner_dims * num_words, outer_dims, bias=False)
            self.norm2 = build_norm_layer(norm_cfg, outer_dims)[1]

    def forward(self, words: torch.Tensor, batch: int) -> torch.Tensor:
        """``words`` (B * N, W, inner) -> (B, N, outer)."""
        if self.legacy:
            return self.proj(self.norm1(words).reshape(batch, -1,
                                                       self.proj.in_features))
        return self.norm2(
            self.proj(
                self.norm1(words.reshape(batch, -1, self.proj.in_features))))


class TNTBlock(BaseModule):
    """Inner transformer on words, words added to their sentence, outer
    transformer on sentences (class token first, if any)."""

    def __init__(self, inner_dims: int, outer_dims: int, num_words: int,
                 inner_heads: int, outer_heads: int, mlp_ratio: float,
                 qkv_bias: bool, drop_rate: float, attn_drop_rate: float,
                 drop_path_rate: float, legacy: bool, se: bool,
                 norm_cfg: dict, act_cfg: dict):
        super().__init__()
        common = dict(mlp_ratio=mlp_ratio, qkv_bias=qkv_bias,
                      drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                      drop_path_rate=drop_path_rate, norm_cfg=norm_cfg,
                      act_cfg=act_cfg)
        self.inner = TransformerLayer(inner_dims, inner_heads, **common)
        self.word_to_sentence = WordsToSentence(inner_dims, outer_dims,
                                                num_words, legacy, norm_cfg)
        self.outer = TransformerLayer(
            outer_dims, outer_heads,
            mlp_extra=SqueezeExcite(outer_dims) if se else None, **common)

    def forward(self, words: torch.Tensor, sentences: torch.Tensor,
                num_prefix: int) -> Tuple[torch.Tensor, torch.Tensor]:
        words = self.inner(words)
        update = self.word_to_sentence(words, sentences.shape[0])
        sentences = torch.cat(
            [sentences[:, :num_prefix], sentences[:, num_prefix:] + update],
            dim=1)
        return words, self.outer(sentences)


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of a (B, C, H, W) map."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _resample(in_channels: int, out_channels: int, scale: int) -> nn.Module:
    """Stride-16 map to ``16 / scale`` stride: ``scale`` 4 or 2 upsample with
    2x2 transposed convs (LN + GELU between two), 1 keeps, 0.5 max-pools
    (ceil mode: ceil(H / 32) rows, as the other backbones give); a 1x1 conv
    when the channels must change without resampling."""
    if scale == 4:
        mid = in_channels // 2
        return nn.Sequential(
            nn.ConvTranspose2d(in_channels, mid, 2, 2), LayerNorm2d(mid),
            nn.GELU(), nn.ConvTranspose2d(mid, out_channels, 2, 2))
    if scale == 2:
        return nn.ConvTranspose2d(in_channels, out_channels, 2, 2)
    layers = [nn.MaxPool2d(2, ceil_mode=True)] if scale == 0.5 else []
    if out_channels != in_channels:
        layers.append(nn.Conv2d(in_channels, out_channels, 1))
    return nn.Sequential(*layers)


def _two_fcs(owner: str, name: str, num_fcs, ours: dict) -> None:
    if num_fcs != 2:
        raise ValueError(f'{owner}: num_fcs={num_fcs}: the MLPs here have '
                         'two layers (fc1, fc2), as TNT has')


#: mmpretrain's spellings, read by read_peer_keywords
TNT_PEER_KEYWORDS = dict(
    ffn_ratio=another_name_for('mlp_ratio', 4.),
    first_stride=another_name_for('inner_stride', 4),
    num_fcs=_two_fcs,
)


@MODELS.register_module()
class TNT(BackboneBase):
    """TNT backbone.

    Args:
        arch (str | dict): ``'small'``/``'s'`` (outer 384, inner 24, heads
            6 / 4), ``'base'``/``'b'`` (640, 40, 10 / 4), depth 12; or a dict
            with ``outer_dims, inner_dims, outer_heads, inner_heads, depth``
            (or mmpretrain's keys ``embed_dims_outer, embed_dims_inner,
            num_heads_outer, num_heads_inner, num_layers``).
        img_size (int): pretraining size; sets the stored sentence position
            grid (14x14 at 224), resized to the input's grid on the fly.
        patch_size (int): sentence size (16); ``inner_stride`` (4) the word
            stride inside it, so a sentence holds (16/4)^2 = 16 words.
        legacy (bool): the layout (module doc).
        se (bool): squeeze-excitation after the outer MLP (official option).
        with_cls_token (bool): prepend the class token (needed for
            classification and for ImageNet weights' outer attention).
        out_type (str): ``'pyramid'`` (4 maps, strides 4/8/16/32),
            ``'cls_token'`` (classification: ``(B, outer)``) or
            ``'avg_featmap'`` (mean of the sentence tokens).
        pyramid (str | sequence): ``'simple'`` -- every level resampled
            from the last block (ViTDet's simple feature pyramid);
            ``'depths'`` -- level i from the 3rd, 6th, 9th, 12th block; or
            four block indices, level i from block ``pyramid[i]``.
        out_indices (sequence): which pyramid levels to return.
        out_channels (sequence): channels per level; default outer/4,
            outer/2, outer, outer.
        frozen_stages (int): -1 nothing; 0 the embeddings; k also the first
            k blocks.
        with_cp (bool): gradient checkpointing per block.
        act_cfg (dict): the MLPs' activation.
        **peer_keywords: mmpretrain's ``ffn_ratio`` and ``first_stride``
            (its names of ``mlp_ratio`` and ``inner_stride``) and ``num_fcs``
            (its MLP depth, 2 only): ``TNT_PEER_KEYWORDS``; any other
            keyword is a ``TypeError`` naming them.
        convention (str): ``'mmdet'`` (this project's defaults: ``arch``
            ``'small'``, ``drop_path_rate`` 0.1, the official layout
            ``legacy=False``, ``out_type='pyramid'``) or ``'mmpretrain'``
            (mmpretrain's TNT: ``'b'``, 0, its legacy layout, the class
            token); by default mmpretrain's while mmpretrain is the default
            scope (:func:`~.base.resolve_convention`). ``arch``,
            ``drop_path_rate``, ``legacy`` and ``out_type`` given override
            either.
    """
    arch_zoo = {
        **dict.fromkeys(['s', 'small'],
                        dict(outer_dims=384, inner_dims=24, outer_heads=6,
                             inner_heads=4, depth=12)),
        **dict.fromkeys(['b', 'base'],
                        dict(outer_dims=640, inner_dims=40, outer_heads=10,
                             inner_heads=4, depth=12)),
    }
    #: the peers' keywords taken besides the signature's
    peer_keywords = tuple(TNT_PEER_KEYWORDS)
    OUT_TYPES = ('pyramid', 'cls_token', 'avg_featmap')
    PYRAMIDS = ('simple', 'depths')
    # mmpretrain's custom-arch keys, ours
    MMPRETRAIN_ARCH_KEYS = dict(
        embed_dims_outer='outer_dims', embed_dims_inner='inner_dims',
        num_heads_outer='outer_heads', num_heads_inner='inner_heads',
        num_layers='depth')
    # the defaults that differ: ours (a dense-prediction backbone, the
    # official layout) and mmpretrain's TNT (a classifier, the legacy layout)
    DEFAULTS = dict(
        mmdet=dict(arch='small', drop_path_rate=0.1, legacy=False,
                   out_type='pyramid'),
        mmpretrain=dict(arch='b', drop_path_rate=0., legacy=True,
                        out_type='cls_token'))

    def __init__(self,
                 arch: Union[str, dict, None] = None,
                 img_size: int = 224,
                 patch_size: int = 16,
                 inner_stride: int = 4,
                 in_channels: int = 3,
                 mlp_ratio: float = 4.,
                 qkv_bias: bool = False,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: Optional[float] = None,
                 legacy: Optional[bool] = None,
                 se: bool = False,
                 with_cls_token: bool = True,
                 out_type: Optional[str] = None,
                 pyramid: Union[str, Sequence[int]] = 'simple',
                 out_indices: Sequence[int] = (0, 1, 2, 3),
                 out_channels: Optional[Sequence[int]] = None,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 norm_cfg: dict = dict(type='LN'),
                 act_cfg: dict = dict(type='GELU'),
                 convention: Optional[str] = None,
                 init_cfg: Union[dict, List[dict], None] = None,
                 **peer_keywords):
        super().__init__(init_cfg=init_cfg)
        self.convention = resolve_convention('TNT', convention)
        defaults = self.DEFAULTS[self.convention]
        arch = defaults['arch'] if arch is None else arch
        drop_path_rate = defaults['drop_path_rate'] \
            if drop_path_rate is None else drop_path_rate
        legacy = defaults['legacy'] if legacy is None else legacy
        out_type = defaults['out_type'] if out_type is None else out_type
        # mmpretrain's spellings (and, below, its custom-arch keys)
        check_keywords('TNT', peer_keywords, self.peer_keywords)
        ours = read_peer_keywords(
            'TNT', TNT_PEER_KEYWORDS, peer_keywords,
            dict(mlp_ratio=mlp_ratio, inner_stride=inner_stride))
        mlp_ratio, inner_stride = ours['mlp_ratio'], ours['inner_stride']
        if self.convention == 'mmpretrain' and act_cfg != dict(type='GELU'):
            raise ValueError(
                f"TNT: act_cfg={act_cfg!r}: mmpretrain's TNT takes act_cfg "
                'but its MLPs use GELU whatever it says; give '
                "convention='mmdet' for MLPs with this activation")
        if isinstance(arch, dict) and set(arch) == set(
                self.MMPRETRAIN_ARCH_KEYS):
            arch = {self.MMPRETRAIN_ARCH_KEYS[k]: v for k, v in arch.items()}
        self.in_channels = in_channels
        arch = resolve_arch('TNT', self.arch_zoo, arch,
                            ('outer_dims', 'inner_dims', 'outer_heads',
                             'inner_heads', 'depth'))
        if out_type not in self.OUT_TYPES:
            raise ValueError(f'out_type must be one of {self.OUT_TYPES}, got '
                             f'{out_type!r}')
        pyramid_blocks = None
        if not isinstance(pyramid, str):
            pyramid, pyramid_blocks = 'depths', tuple(pyramid)
        if pyramid not in self.PYRAMIDS:
            raise ValueError(f'pyramid must be one of {self.PYRAMIDS} or four '
                             f'block indices, got {pyramid!r}')
        if patch_size % inner_stride:
            raise ValueError(f'patch_size {patch_size} must be a multiple of '
                             f'inner_stride {inner_stride}')
        if out_type == 'cls_token' and not with_cls_token:
            raise ValueError("out_type='cls_token' needs with_cls_token=True")
        self.outer_dims = outer = arch['outer_dims']
        self.inner_dims = inner = arch['inner_dims']
        self.depth = arch['depth']
        self.patch_size = patch_size
        self.words_per_side = patch_size // inner_stride
        num_words = self.words_per_side**2
        self.legacy = legacy
        self.with_cls_token = with_cls_token
        self.num_prefix = int(with_cls_token)
        self.out_type = out_type
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self.with_cp = with_cp
        self.pretrain_grid = (img_size // patch_size, ) * 2

        # words: 7x7 stride-4 conv (whole image if legacy, else per patch)
        self.word_embed = nn.Conv2d(
            in_channels, inner, 7, stride=inner_stride, padding=3)
        self.word_pos = nn.Parameter(
            torch.zeros(1, inner, self.words_per_side, self.words_per_side))
        # sentences: LN, Linear, LN over each sentence's words
        self.stem_norm1 = build_norm_layer(norm_cfg, inner * num_words)[1]
        self.stem_proj = nn.Linear(inner * num_words, outer)
        self.stem_norm2 = build_norm_layer(norm_cfg, outer)[1]
        self.cls_token = nn.Parameter(torch.zeros(1, 1, outer)) \
            if with_cls_token else None
        self.sentence_pos = nn.Parameter(
            torch.zeros(1, self.num_prefix + math.prod(self.pretrain_grid),
                        outer))
        self.pos_drop = nn.Dropout(drop_rate)

        rates = torch.linspace(0, drop_path_rate, self.depth).tolist()
        self.blocks = ModuleList(
            TNTBlock(inner, outer, num_words, arch['inner_heads'],
                     arch['outer_heads'], mlp_ratio, qkv_bias, drop_rate,
                     attn_drop_rate, rate, legacy, se, norm_cfg, act_cfg)
            for rate in rates)
        # the final norm serves the class-token / pooled outputs only; the
        # pyramid has its own norms, and a parameter no output uses fails
        # DDP (find_unused_parameters=False) at the second iteration
        self.norm = None if out_type == 'pyramid' else build_norm_layer(
            norm_cfg, outer)[1]
        self._register_load_state_dict_pre_hook(self._peer_layout)
        self._register_load_state_dict_pre_hook(self._drop_unused_norm)

        if out_type == 'pyramid':
            self.pyramid = pyramid
            blocks = pyramid_blocks or (
                (self.depth - 1, ) * 4 if pyramid == 'simple' else tuple(
                    round(self.depth * k / 4) - 1 for k in (1, 2, 3, 4)))
            if len(blocks) != 4 or not all(0 <= b < self.depth
                                           for b in blocks):
                raise ValueError(f'pyramid must give 4 block indices in '
                                 f'[0, {self.depth}), got {blocks}')
            self.pyramid_blocks = tuple(blocks)
            self.out_channels = tuple(
                out_channels or (outer // 4, outer // 2, outer, outer))
            self.out_indices = tuple(out_indices)
            if not set(self.out_indices) <= {0, 1, 2, 3}:
                raise ValueError(f'out_indices {out_indices} must be pyramid '
                                 'levels 0..3 (strides 4, 8, 16, 32)')
            self.pyramid_norms = ModuleList(
                build_norm_layer(norm_cfg, outer)[1] for _ in range(4))
            self.pyramid_convs = ModuleList(
                _resample(outer, c, s)
                for c, s in zip(self.out_channels, (4, 2, 1, 0.5)))
        self._freeze_stages()

    def _peer_layout(self, state_dict, prefix, *args, **kwargs):
        """mmpretrain's, timm's and the official layouts (also under a
        classifier's ``backbone.``) converted on load, so
        ``load_state_dict``, ``load_from`` and ``resume`` take them as
        ``init_cfg=Pretrained`` does; ours passes as it is."""
        keys = [k for k in state_dict if k.startswith(prefix)]
        sub = {k[len(prefix):]: state_dict[k] for k in keys}
        if not sub or 'sentence_pos' in sub:
            return
        try:
            converted = self._to_our_layout(sub)
        except ValueError as e:
            if 'not a TNT checkpoint' in str(e):
                return  # not a layout we know: the load names the keys
            raise
        for key in keys:
            del state_dict[key]
        for key, value in converted.items():
            state_dict[prefix + key] = value

    def _drop_unused_norm(self, state_dict, prefix, *args, **kwargs):
        """Classifier releases and pyramid checkpoints written before the
        pyramid dropped the final norm carry ``norm.*``: nothing reads it.
        (``load_pretrained`` and ``verify_checkpoint`` apply load pre-hooks
        too, so this one place serves every way a file is read.)"""
        if self.norm is None:
            for name in ('weight', 'bias'):
                state_dict.pop(f'{prefix}norm.{name}', None)

    # ------------------------------------------------------------ weights
    def init_tokens(self):
        for p in (self.cls_token, self.sentence_pos, self.word_pos):
            if p is not None:
                trunc_normal_(p, std=.02)
        if self.convention == 'mmpretrain':
            # mmpretrain's TNT attends with torch's nn.MultiheadAttention,
            # whose input projection starts xavier-uniform with a zero bias
            # and is no Linear for an init_cfg to redraw
            for m in self.modules():
                if isinstance(m, TransformerLayer):
                    nn.init.xavier_uniform_(m.attn.qkv.weight)
                    if m.attn.qkv.bias is not None:
                        nn.init.zeros_(m.attn.qkv.bias)

    def new_in_pretrained(self, key: str) -> bool:
        return key.startswith('pyramid_')  # the pyramid is new

    def foreign_in_pretrained(self, key: str) -> bool:
        return key.startswith('head.')  # a classifier's head is not ours

    def _to_our_layout(self, state: dict) -> dict:
        """Any known TNT layout as ours (its pre-hook's conversion)."""
        state = tnt_any_to_mmvisattn(state)
        if 'blocks.0.word_to_sentence.norm2.weight' in state and self.legacy:
            raise ValueError('this checkpoint has the official (non-legacy) '
                             'TNT layout: build the backbone with '
                             'legacy=False')
        if ('blocks.0.word_to_sentence.proj.bias' in state
                and not self.legacy):
            raise ValueError('this checkpoint has the legacy TNT layout '
                             '(mmpretrain / timm tnt_s_legacy): build the '
                             'backbone with legacy=True')
        pos = state.get('sentence_pos')
        if pos is not None and pos.shape != self.sentence_pos.shape:
            # every released TNT has a class token before a square grid
            prefix = 1 if _is_square(pos.shape[1] - 1) else 0
            side = math.isqrt(pos.shape[1] - prefix)
            grid = pos[:, prefix:]
            if (side, side) != self.pretrain_grid:
                grid = _resize_grid(grid, (side, side), self.pretrain_grid)
            head = pos[:, :self.num_prefix] if prefix else \
                self.sentence_pos[:, :self.num_prefix].detach()
            state['sentence_pos'] = torch.cat([head, grid], 1)
        if self.cls_token is None:
            state.pop('cls_token', None)
        return state

    # ------------------------------------------------------------ forward
    def embed(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor,
                                              Tuple[int, int]]:
        """Image -> words (B*N, W, inner), sentences (B, prefix + N, outer)
        and the sentence grid (rows, cols)."""
        p = self.patch_size
        # bottom/right zero padding to whole sentences
        x = F.pad(x, (0, -x.shape[-1] % p, 0, -x.shape[-2] % p))
        B, C, H, W = x.shape
        rows, cols = H // self.patch_size, W // self.patch_size
        s = self.words_per_side
        if self.legacy:
            words = self.word_embed(x)  # (B, inner, 4 rows, 4 cols)
            words = words.view(B, self.inner_dims, rows, s, cols, s).permute(
                0, 2, 4, 1, 3, 5).reshape(B * rows * cols, self.inner_dims, s,
                                          s)
        else:
            patches = x.view(B, C, rows, p, cols, p).permute(
                0, 2, 4, 1, 3, 5).reshape(B * rows * cols, C, p, p)
            words = self.word_embed(patches)
        words = (words + self.word_pos).flatten(2).transpose(1, 2)
        sentences = self.stem_norm2(
            self.stem_proj(self.stem_norm1(words.reshape(B, rows * cols,
                                                         -1))))
        if self.cls_token is not None:
            sentences = torch.cat(
                [self.cls_token.expand(B, -1, -1), sentences], dim=1)
        sentences = sentences + self._sentence_pos((rows, cols))
        return words, self.pos_drop(sentences), (rows, cols)

    def _sentence_pos(self, grid: Tuple[int, int]) -> torch.Tensor:
        pos = self.sentence_pos
        # traced sizes (mmvisattn.ops.symbolic): always resize (bicubic to
        # the same grid is the identity), never decide in Python
        if is_concrete(*grid) and grid == self.pretrain_grid:
            return pos
        return torch.cat([
            pos[:, :self.num_prefix],
            _resize_grid(pos[:, self.num_prefix:], self.pretrain_grid, grid)
        ], 1)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        check_images(x, self.in_channels, 'TNT')
        in_h, in_w = x.shape[-2:]
        words, sentences, grid = self.embed(x)
        taps = {}
        wanted = set(self.pyramid_blocks) if self.out_type == 'pyramid' \
            else set()
        for i, block in enumerate(self.blocks):
            if self.with_cp and self.training and sentences.requires_grad:
                words, sentences = cp.checkpoint(
                    block, words, sentences, self.num_prefix,
                    use_reentrant=False)
            else:
                words, sentences = block(words, sentences, self.num_prefix)
            if i in wanted:
                taps[i] = sentences[:, self.num_prefix:]
        if self.out_type == 'cls_token':
            return (self.norm(sentences)[:, 0], )
        if self.out_type == 'avg_featmap':
            return (self.norm(sentences)[:, self.num_prefix:].mean(1), )
        return self._pyramid(taps, grid, (in_h, in_w))

    def _pyramid(self, taps: dict, grid: Tuple[int, int],
                 size: Tuple[int, int]) -> Tuple[torch.Tensor, ...]:
        B = next(iter(taps.values())).shape[0]
        outs = []
        for level in self.out_indices:
            tokens = self.pyramid_norms[level](taps[self.pyramid_blocks[level]])
            fmap = tokens.transpose(1, 2).reshape(B, self.outer_dims, *grid)
            fmap = self.pyramid_convs[level](fmap)
            stride = 4 * 2**level
            # the padded border beyond ceil(H / stride) is not image
            # (ceil_div: math.ceil of a traced size would bake it in)
            outs.append(fmap[..., :ceil_div(size[0], stride),
                             :ceil_div(size[1], stride)])
        return tuple(outs)

    # ----------------------------------------------------------- training
    def frozen_parts(self):
        modules: List[nn.Module] = [self.word_embed, self.stem_norm1,
                                    self.stem_proj, self.stem_norm2]
        modules += list(self.blocks[:self.frozen_stages])
        params = [self.word_pos, self.sentence_pos] + (
            [self.cls_token] if self.cls_token is not None else [])
        return modules, params


def _is_square(n: int) -> bool:
    return n >= 0 and math.isqrt(n)**2 == n


def _resize_grid(pos: torch.Tensor, src: Tuple[int, int],
                 dst: Tuple[int, int]) -> torch.Tensor:
    """(1, src_h * src_w, C) position embeddings -> (1, dst_h * dst_w, C),
    bicubic over the grid."""
    C = pos.shape[-1]
    grid = pos.reshape(1, src[0], src[1], C).permute(0, 3, 1, 2)
    grid = F.interpolate(grid.float(), size=dst, mode='bicubic',
                         align_corners=False).to(pos.dtype)
    return grid.permute(0, 2, 3, 1).reshape(1, dst[0] * dst[1], C)
