from .verification_targets import (
                                   CornerTargetAssigner,
                                   CornerTargets,
                                   foreground_targets,
                                   gaussian_radius,
)

__all__ = [
    'CornerTargetAssigner', 'CornerTargets', 'foreground_targets',
    'gaussian_radius'
]
