from .corner_pool import CornerPoolBlock
from .patch import PatchEmbed, PatchMerging
from .window_msa import SwinAttention, SwinBlock

__all__ = [
    'CornerPoolBlock', 'PatchEmbed', 'PatchMerging', 'SwinAttention',
    'SwinBlock'
]
