from .setup_env import register_config_package, register_safe_globals

__all__ = ['register_config_package', 'register_safe_globals']
