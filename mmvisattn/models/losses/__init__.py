from .legacy_giou_loss import LegacyGIoULoss, legacy_giou_loss
from .separate_focal_loss import SeparateFocalLoss, separate_focal_loss

__all__ = [
    'LegacyGIoULoss', 'legacy_giou_loss', 'SeparateFocalLoss',
    'separate_focal_loss'
]
