from .backbones import *  # noqa: F403
