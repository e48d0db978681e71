"""RepPoints v2 detector: backbone, FPN, :class:`RepPointsV2Head`."""
from mmdet.models.detectors import RepPointsDetector

from mmvisattn.registry import MODELS


@MODELS.register_module()
class RepPointsV2Detector(RepPointsDetector):
    """mmdet's single-stage loop is all RepPoints v2 needs: the head's
    ``loss_by_feat`` takes the ground truth as ``batch_gt_instances`` and
    builds the corner and foreground targets itself, so no extra pipeline
    step sits before ``PackDetInputs``. The class exists so that configs
    and checkpoints name the method."""
