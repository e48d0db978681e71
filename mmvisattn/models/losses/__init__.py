from .separate_focal_loss import SeparateFocalLoss, separate_focal_loss

__all__ = ['SeparateFocalLoss', 'separate_focal_loss']
