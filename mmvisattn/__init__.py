"""mmvisattn: modern vision attention backbones for mmdet and mmseg.

Importing it registers its models in its own registries and changes nothing
in any other library; :func:`runtime` is the scope its tools (and a user's
own script) run in (``mmvisattn/environment.py``)."""
from . import models  # noqa: F401  (registers the backbones)
from .environment import runtime
from .registry import MODELS
from .version import __version__, version_info

__all__ = ['__version__', 'version_info', 'MODELS', 'runtime']
