"""mmvisattn: modern vision attention backbones for mmdet and mmseg."""
from .utils.setup_env import register_config_package, register_safe_globals
from .version import __version__, version_info

register_safe_globals()
register_config_package()

from . import models  # noqa: E402,F401  (registers the backbones)
from .registry import MODELS  # noqa: E402

__all__ = ['__version__', 'version_info', 'MODELS']
