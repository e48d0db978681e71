from .bifpn import BiFPN

__all__ = ['BiFPN']
