from .patch import PatchEmbed, PatchMerging
from .window_msa import SwinBlock, WindowMSA

__all__ = ['PatchEmbed', 'PatchMerging', 'WindowMSA', 'SwinBlock']
