"""Keywords we removed, refused by name with what to write instead
(CHANGELOG.md, "Removed").

Python's own error for a removed keyword names neither the new spelling
nor, for a subclass of a peer's class (an mmseg decode head), our class.
The classes whose removed names users will keep writing say what to write
instead: RSWAtt's ``window_size`` (one window everywhere else in the
package) and TNT's ``pyramid_blocks``.
"""
import functools


def removed_keywords(**removed: str):
    """Class decorator: the class (and its subclasses) refuse each keyword
    of ``removed`` (name -> what to write instead) with a ``TypeError``
    saying what to write, before ``__init__`` runs; the signature stays
    the class's own."""

    def decorate(cls: type) -> type:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            for name, instead in removed.items():
                if name in kwargs:
                    raise TypeError(
                        f'{type(self).__name__}: {name}= was removed; write '
                        f'{instead} (CHANGELOG.md)')
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


#: RSWAtt's windows are one square window per scale; ``window_size`` is one
#: window (an int or an (h, w) pair) everywhere else.
SCALE_WINDOWS = dict(
    window_size='scale_windows=(5, 9): one square window per scale (an int '
    'is one scale)')
