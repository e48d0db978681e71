from .reppoints_v2_head import RepPointsV2Head

__all__ = ['RepPointsV2Head']
