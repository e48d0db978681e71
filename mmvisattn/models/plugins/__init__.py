from .rswatt_plugins import RSWAttNeck, RSWAttPlugin, RSWAttResidual

__all__ = ['RSWAttResidual', 'RSWAttPlugin', 'RSWAttNeck']
