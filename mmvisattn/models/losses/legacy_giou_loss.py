"""GIoU loss with the legacy "+1" pixel convention (widths are
``x2 - x1 + 1``), as the RepPoints v2 authors' and the Swin authors'
RepPoints v2 models compute it (their ``giou_loss_oldver``, after ATSS).

RepPoints feeds this loss boxes divided by ``4 x stride``, so the "+1" is
not one pixel there but ``4 x stride`` pixels: it softens the loss of small
boxes a great deal. mmdet 3.x's ``GIoULoss`` has no such term, hence this
loss, kept only to reproduce the authors' models.
"""
from typing import Optional

import torch
import torch.nn as nn
from mmdet.models.losses.utils import weighted_loss
from torch import Tensor

from mmvisattn.registry import MODELS


@weighted_loss
def legacy_giou_loss(pred: Tensor, target: Tensor, eps: float = 1e-7,
                     offset: float = 1.0) -> Tensor:
    """``1 - GIoU`` of aligned ``(n, 4)`` x1y1x2y2 boxes, with ``offset``
    added to every width and height."""
    lt = torch.max(pred[:, :2], target[:, :2])
    rb = torch.min(pred[:, 2:], target[:, 2:])
    overlap = (rb - lt + offset).clamp(min=0).prod(dim=1)
    area_pred = (pred[:, 2:] - pred[:, :2] + offset).prod(dim=1)
    area_target = (target[:, 2:] - target[:, :2] + offset).prod(dim=1)
    union = area_pred + area_target - overlap + eps
    enclose_lt = torch.min(pred[:, :2], target[:, :2])
    enclose_rb = torch.max(pred[:, 2:], target[:, 2:])
    enclose = (enclose_rb - enclose_lt + offset).clamp(min=0).prod(dim=1) + eps
    giou = overlap / union - (enclose - union) / enclose
    return 1 - giou


@MODELS.register_module()
class LegacyGIoULoss(nn.Module):
    """:func:`legacy_giou_loss` as an mmdet loss module
    (``loss(pred, target, weight, avg_factor=...)``, like ``GIoULoss``).

    Args:
        offset (float): added to widths and heights (1, the legacy
            convention; 0 gives mmdet's ``GIoULoss``).
    """

    def __init__(self,
                 eps: float = 1e-6,
                 offset: float = 1.0,
                 reduction: str = 'mean',
                 loss_weight: float = 1.0) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.reduction, self.loss_weight = reduction, loss_weight

    def forward(self,
                pred: Tensor,
                target: Tensor,
                weight: Optional[Tensor] = None,
                avg_factor: Optional[float] = None,
                reduction_override: Optional[str] = None) -> Tensor:
        reduction = reduction_override or self.reduction
        if weight is not None and reduction != 'none' and not torch.any(
                weight > 0):
            # no positive: a zero that keeps the graph (as mmdet's GIoULoss)
            return (pred * (weight if weight.dim() == pred.dim() else
                            weight.unsqueeze(-1))).sum()
        if weight is not None and weight.dim() > 1:
            # per-coordinate weights of the point heads: one per box
            weight = weight.mean(-1)
        return self.loss_weight * legacy_giou_loss(
            pred, target, weight, eps=self.eps, offset=self.offset,
            reduction=reduction, avg_factor=avg_factor)
