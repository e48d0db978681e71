"""mmvisattn: modern vision attention backbones for mmdet and mmseg."""
from .setup_env import setup_env
from .version import __version__, version_info

# The only changes to other libraries made at import (listed and explained in
# mmvisattn/setup_env.py): torch's safe-load allow-list, mmengine's `pkg::`
# config lookup for the packages it cannot find, and mmcv's ops in fp32
# inside a bf16 AmpOptimWrapper's autocast.
setup_env()

from . import models  # noqa: E402,F401  (registers the backbones)
from .registry import MODELS  # noqa: E402

__all__ = ['__version__', 'version_info', 'MODELS']
