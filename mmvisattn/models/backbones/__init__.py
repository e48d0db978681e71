from .rswatt import RSWAttTransformer, RSWAttViT
from .swin import SwinTransformer
from .swin_v2 import SwinTransformerV2
from .tnt import TNT

__all__ = [
    'SwinTransformer', 'SwinTransformerV2', 'TNT', 'RSWAttTransformer',
    'RSWAttViT'
]
