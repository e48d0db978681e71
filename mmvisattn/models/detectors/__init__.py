from .reppoints_v2 import RepPointsV2Detector

__all__ = ['RepPointsV2Detector']
