from .patch import PatchEmbed, PatchMerging
from .window_msa import SwinAttention, SwinBlock

__all__ = ['PatchEmbed', 'PatchMerging', 'SwinAttention', 'SwinBlock']
