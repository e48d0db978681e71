"""Swin Transformer V2 backbone (Liu et al., CVPR 2022): Swin's skeleton
with V2's parts (:mod:`mmvisattn.models.layers.swin_v2`)."""
from typing import Optional, Sequence, Union

from mmvisattn.registry import MODELS

from ..layers.swin_v2 import PostNormPatchMerging, ResPostNormSwinBlock
from .base import resolve_convention
from .swin import SwinTransformer, per_stage


@MODELS.register_module()
class SwinTransformerV2(SwinTransformer):
    """Swin Transformer V2: residual post-norm blocks, scaled cosine window
    attention with the log-spaced continuous position bias, and patch
    merging normalised after its projection; feature pyramid, freezing,
    initialisation and checkpoint loading as :class:`SwinTransformer`.

    Takes mmpretrain's ``SwinTransformerV2`` keywords with their meaning
    there for a model built for mmpretrain, and mmdet's meaning elsewhere
    (``convention``; see :class:`SwinTransformer`):

    Args:
        arch: ``'tiny'|'small'|'base'|'large'`` (the paper's T/S/B/L, also
            ``'t'``...) or a dict with ``embed_dims``, ``depths``,
            ``num_heads``.
        img_size: the pre-training image size (256): the grid of the
            absolute embedding, if any.
        window_size: M (default 8), one window for every stage; one per
            stage is ``window_sizes`` (mmpretrain's 256px window-16 models
            use ``(16, 16, 16, 8)``: stage 4 of a 256 image is 8x8; its
            spelling ``window_size=[16, 16, 16, 8]`` is read as that).
        pretrained_window_sizes: the window each stage was pre-trained at
            (one int or one per stage; 0: its own window): the continuous
            bias extends a window-8 checkpoint to window 16 or 24 with
            nothing resized.
        pad_small_map: as :class:`SwinTransformer`'s; default False for a
            model built for mmpretrain (its default), True elsewhere (any
            detection size).
        attn_cfg: the attention kind and its options; by default
            ``CosineWindowAttention``.
        **kwargs: :class:`SwinTransformer`'s other arguments (``mlp_ratio``,
            ``qkv_bias``, ``out_indices``, ``frozen_stages``, ``norm_eval``,
            ``with_cp``, ``use_abs_pos_embed``, ``init_cfg``, ...).
    """

    block = ResPostNormSwinBlock
    merging = PostNormPatchMerging
    default_window_size = 8

    def __init__(self,
                 arch: Union[str, dict] = 'tiny',
                 img_size: Union[int, Sequence[int]] = 256,
                 window_size: Union[int, Sequence[int], None] = None,
                 pretrained_window_sizes: Union[int, Sequence[int]] = 0,
                 pad_small_map: Optional[bool] = None,
                 attn_cfg: Optional[dict] = None,
                 convention: Optional[str] = None,
                 **kwargs):
        convention = resolve_convention('SwinTransformerV2', convention)
        if pad_small_map is None:
            pad_small_map = convention == 'mmdet'
        self._pretrained_windows = pretrained_window_sizes
        super().__init__(arch=arch, img_size=img_size,
                         window_size=window_size, pad_small_map=pad_small_map,
                         attn_cfg=attn_cfg, convention=convention, **kwargs)

    def stage_attn_cfg(self, i: int, attn_cfg: dict) -> dict:
        """Stage ``i``'s attention: the window it was pre-trained at."""
        windows = per_stage('SwinTransformerV2', 'pretrained_window_sizes',
                            self._pretrained_windows, len(self.depths),
                            minimum=0)
        if not windows[i]:
            return attn_cfg
        return dict(attn_cfg, pretrained_window_size=windows[i])

    def frozen_parts(self):
        """mmpretrain's ``frozen_stages=k`` for V2, whose stages open with
        their merging: the patch embedding, stages 0..k (the mergings into
        stages 1..k, which our layout keeps at the end of stages 0..k-1)
        and the parameters of their output norms. mmdet's meaning is
        :class:`SwinTransformer`'s."""
        if self.convention != 'mmpretrain':
            return super().frozen_parts()
        k = self.frozen_stages
        modules = [self.patch_embed] + [self.layers[i] for i in range(k)]
        modules.append(self.layers[k].blocks)
        norms = [getattr(self, f'norm{i}') for i in range(k + 1)
                 if i in self.out_indices]
        return modules, [p for norm in norms for p in norm.parameters()]
