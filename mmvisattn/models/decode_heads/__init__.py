from .rswatt_uper_head import RSWAttUPerHead

__all__ = ['RSWAttUPerHead']
