from .rswatt_head import RSWAttHead
from .rswatt_uper_head import RSWAttUPerHead

__all__ = ['RSWAttUPerHead', 'RSWAttHead']
