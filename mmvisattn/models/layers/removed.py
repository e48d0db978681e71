"""Keywords we removed, refused by name with what to write instead
(CHANGELOG.md, "Removed").

Python's own error for a removed keyword names neither the new spelling
nor, for a subclass of a peer's class (an mmseg decode head), our class.
Where a removed name is still a keyword elsewhere in the package with
another meaning (RSWAtt's ``window_size``: one window everywhere else),
users will keep writing it, so the class says what to write instead.
"""
import functools
from typing import Dict


def refuse_removed(owner: str, given: Dict[str, object],
                   removed: Dict[str, str]) -> None:
    """A ``TypeError`` for the first of ``removed`` (name -> what to write
    instead) that ``given`` holds."""
    for name, instead in removed.items():
        if name in given:
            raise TypeError(f'{owner}: {name}= was removed; write {instead} '
                            '(CHANGELOG.md)')


def removed_keywords(**removed: str):
    """Class decorator: the class (and its subclasses) refuse each keyword
    of ``removed`` (name -> what to write instead) before ``__init__``
    runs; the signature stays the class's own."""

    def decorate(cls: type) -> type:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            refuse_removed(type(self).__name__, kwargs, removed)
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


#: RSWAtt's windows are one square window per scale; ``window_size`` is one
#: window (an int or an (h, w) pair) everywhere else.
SCALE_WINDOWS = dict(
    window_size='scale_windows=(5, 9): one square window per scale (an int '
    'is one scale)')
