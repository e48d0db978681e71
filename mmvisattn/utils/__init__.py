from .listing import short_listing

__all__ = ['short_listing']
