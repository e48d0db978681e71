from .corner_pool import CornerPoolBlock
from .patch import PatchEmbed, PatchMerging
from .position import PixelPositionEncoding
from .rswatt import ReconstructedWindowAttention, RSWAttBlock
from .transformer import MultiheadSelfAttention, TransformerLayer
from .window_msa import (GlobalAttention, HaloSlidingWindowAttention,
                         PerformerAttention, SlidingWindowAttention,
                         SwinAttention, SwinBlock, WindowAttention,
                         build_swin_attention)

__all__ = [
    'CornerPoolBlock', 'PatchEmbed', 'PatchMerging', 'SwinAttention',
    'WindowAttention', 'SlidingWindowAttention',
    'HaloSlidingWindowAttention', 'PerformerAttention', 'GlobalAttention',
    'build_swin_attention', 'SwinBlock', 'MultiheadSelfAttention',
    'TransformerLayer', 'ReconstructedWindowAttention', 'RSWAttBlock',
    'PixelPositionEncoding'
]
