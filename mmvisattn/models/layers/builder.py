"""The one builder of the attention parts a config names.

Swin's attention kinds (``attn_cfg`` of a Swin block), RSWAtt's attentions
(``attn_cfg`` of its block, plug-ins, neck and heads) and RSWAtt's parts
(``window_predictor``, ``reconstruction``, ``fusion``) are registered
classes chosen by ``type``, each with its own options. :func:`build_part`
checks a config one way for all of them and builds it with mmengine's
``MODELS.build`` and ``default_args`` (what the owner supplies itself):

- ``type`` missing: the owner's default kind; a config that is no dict, or
  a ``type`` that is not a registered subclass of the kind's base, is a
  ``ValueError`` naming the argument and the registered choices;
- an option the owner supplies itself (``embed_dims``, the window, ...) is
  a ``ValueError`` saying who sets it;
- an option the class does not take is a ``TypeError`` naming it and the
  class's options (as Python names an unexpected keyword).

The lookup stays in mmvisattn's registry whatever the default scope: an
mmdet or mmseg config builds these layers inside its own.
"""
import inspect
from typing import List, Optional, Tuple

from mmengine.model import BaseModule
from torch import nn

from mmvisattn.registry import MODELS


def registered_kinds(base: type) -> List[str]:
    """Names of the registered subclasses of ``base`` (``base`` too, if it
    is registered), sorted."""
    return sorted(name for name, cls in MODELS.module_dict.items()
                  if isinstance(cls, type) and issubclass(cls, base))


def part_options(cls: type) -> List[str]:
    """The keyword options ``cls`` takes: the named parameters of its
    ``__init__``, and of its bases' while an ``__init__`` passes
    ``**kwargs`` on; ``init_cfg`` aside (a part is initialised by its
    owner)."""
    names: List[str] = []
    for klass in cls.__mro__:
        if klass in (BaseModule, nn.Module, object):
            break
        if '__init__' not in vars(klass):
            continue
        params = inspect.signature(klass.__init__).parameters.values()
        names += [p.name for p in params
                  if p.name not in ('self', 'init_cfg', *names)
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return names


def resolve_part(role: str, cfg, base: type,
                 default: Optional[str] = None) -> Tuple[type, dict]:
    """``cfg`` (``dict(type=NAME, **options)``; without ``type``, or None,
    ``default``) -> (the registered subclass ``NAME`` of ``base``, its
    options). ``role`` names the argument in errors."""
    if default is not None and (cfg is None or isinstance(cfg, dict)):
        cfg = dict(dict(type=default), **(cfg or {}))
    if not isinstance(cfg, dict) or 'type' not in cfg:
        raise ValueError(f'{role} must be dict(type=..., **options), got '
                         f'{cfg!r} (types: '
                         f'{", ".join(registered_kinds(base))})')
    options = dict(cfg)
    name = options.pop('type')
    cls = MODELS.get(name) if isinstance(name, str) else name
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f'{role}: type={name!r} is not a registered '
                         f'{base.__name__} (types: '
                         f'{", ".join(registered_kinds(base))})')
    return cls, options


def check_part_options(role: str, cls: type, options: dict, owner: str,
                       supplied=()) -> None:
    """Each key of ``options`` is one ``cls`` takes and ``owner`` does not
    set itself (the keys of ``supplied``)."""
    own = [k for k in part_options(cls) if k not in supplied]
    for key in options:
        if key in supplied:
            raise ValueError(f'{role}: {key} is set by {owner}, not in '
                             f'{role}')
        if key not in own:
            raise TypeError(
                f'{role}=dict(type={cls.__name__!r}): {cls.__name__} takes '
                f'no option {key!r} (its options: {", ".join(own) or "none"})')


def build_part(role: str, cfg, base: type, owner: str,
               default: Optional[str] = None, offered: Optional[dict] = None,
               **supplied) -> nn.Module:
    """The part ``cfg`` names (:func:`resolve_part`), its options checked
    (:func:`check_part_options`), built by ``MODELS.build`` with what
    ``owner`` ``supplied`` as ``default_args``, and of what it ``offered``
    (a window that global attention has no use for, say) only what the
    class takes."""
    cls, options = resolve_part(role, cfg, base, default)
    takes = part_options(cls)
    supplied.update((k, v) for k, v in (offered or {}).items() if k in takes)
    check_part_options(role, cls, options, owner, supplied)
    return MODELS.build(dict(type=cls, **options), default_args=supplied)
