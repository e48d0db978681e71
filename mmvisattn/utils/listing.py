"""Short listings for error messages."""
from typing import Sequence


def short_listing(items: Sequence[str], limit: int = 5) -> str:
    """The first ``limit`` items, comma-separated, and how many more."""
    items = list(items)
    more = f' ... (+{len(items) - limit} more)' if len(items) > limit \
        else ''
    return ', '.join(items[:limit]) + more
