from .corner_pool import CornerPoolBlock
from .patch import PatchEmbed, PatchMerging
from .rswatt import ReconstructedWindowAttention, RSWAttBlock
from .transformer import MultiheadSelfAttention, TransformerLayer
from .window_msa import SwinAttention, SwinBlock

__all__ = [
    'CornerPoolBlock', 'PatchEmbed', 'PatchMerging', 'SwinAttention',
    'SwinBlock', 'MultiheadSelfAttention', 'TransformerLayer',
    'ReconstructedWindowAttention', 'RSWAttBlock'
]
