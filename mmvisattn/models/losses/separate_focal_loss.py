"""Focal loss with positives and negatives normalised apart (RepPoints v2's
foreground verification)."""
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from mmvisattn.registry import MODELS


def separate_focal_loss(logits: Tensor,
                        target: Tensor,
                        pos_weight: Tensor,
                        avg_factor: float,
                        gamma: float = 2.0,
                        alpha: float = 0.25) -> Tensor:
    """Sigmoid focal loss where the positive terms (``target == 1``) are a
    weighted mean with ``pos_weight`` (e.g. ``1 / box area``, so every
    object counts the same whatever its size) and the negative terms are
    summed and divided by ``avg_factor`` (the number of positives)."""
    positive = target == 1
    # log(sigmoid) / log(1 - sigmoid) from logits: no log(0) at saturation
    log_p = nn.functional.logsigmoid(logits)
    log_not_p = nn.functional.logsigmoid(-logits)
    prob = log_p.exp()
    pos = -alpha * (1 - prob).pow(gamma) * log_p
    neg = -(1 - alpha) * prob.pow(gamma) * log_not_p
    loss = neg[~positive].sum() / max(float(avg_factor), 1.0)
    if positive.any():
        weights = pos_weight[positive]
        loss = loss + (pos[positive] * weights).sum() / weights.sum().clamp(
            min=torch.finfo(weights.dtype).tiny)
    return loss


@MODELS.register_module()
class SeparateFocalLoss(nn.Module):
    """:func:`separate_focal_loss` as an mmdet loss module: called as
    ``loss(logits, target, weight, avg_factor=...)``."""

    def __init__(self,
                 gamma: float = 2.0,
                 alpha: float = 0.25,
                 loss_weight: float = 1.0):
        super().__init__()
        self.gamma, self.alpha, self.loss_weight = gamma, alpha, loss_weight

    def forward(self,
                pred: Tensor,
                target: Tensor,
                weight: Tensor,
                avg_factor: Optional[float] = None) -> Tensor:
        if pred.shape != target.shape or weight.shape != target.shape:
            raise ValueError(
                'SeparateFocalLoss: pred, target and weight must have the '
                f'same shape, got {tuple(pred.shape)}, {tuple(target.shape)} '
                f'and {tuple(weight.shape)}')
        if avg_factor is None:
            avg_factor = float((target == 1).sum())
        return self.loss_weight * separate_focal_loss(
            pred, target, weight, avg_factor, self.gamma, self.alpha)
