from .rswatt import RSWAttTransformer, RSWAttViT
from .swin import SwinTransformer
from .tnt import TNT

__all__ = ['SwinTransformer', 'TNT', 'RSWAttTransformer', 'RSWAttViT']
