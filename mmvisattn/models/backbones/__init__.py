from .rswatt import RSWAttTransformer
from .swin import SwinTransformer
from .tnt import TNT

__all__ = ['SwinTransformer', 'TNT', 'RSWAttTransformer']
