"""Training targets of RepPoints v2's verification branches, computed from
the ground-truth boxes: corner heatmaps with sub-pixel offsets (corner
verification) and per-class foreground maps (foreground verification)."""
from typing import NamedTuple, Tuple

import torch
from torch import Tensor

from mmvisattn.registry import TASK_UTILS


def gaussian_radius(heights: Tensor, widths: Tensor,
                    min_overlap: float = 0.7) -> Tensor:
    """CornerNet's radius, per box: the largest corner displacement that
    keeps a box of this size at IoU >= ``min_overlap`` with the original,
    the smallest of its three cases (both corners inward, both outward, one
    each). The same closed forms as ``mmdet.models.utils.gaussian_radius``,
    on tensors of boxes instead of one Python pair."""
    hw_sum, area = heights + widths, heights * widths
    r1 = (hw_sum - torch.sqrt(hw_sum**2 - 4 * area * (1 - min_overlap) /
                              (1 + min_overlap))) / 2
    r2 = (2 * hw_sum - torch.sqrt(4 * hw_sum**2 - 16 *
                                  (1 - min_overlap) * area)) / 8
    b3 = -2 * min_overlap * hw_sum
    r3 = (b3 + torch.sqrt(b3**2 - 16 * min_overlap *
                           (min_overlap - 1) * area)) / (8 * min_overlap)
    return torch.minimum(torch.minimum(r1, r2), r3)


class CornerTargets(NamedTuple):
    """Per point, columns (top-left, bottom-right)."""
    heatmap: Tensor  # (N, 2) in [0, 1]; 1 at each corner's nearest point
    offset: Tensor  # (N, 4) (dx, dy) of tl then br, in units of stride
    positive: Tensor  # (N, 2) bool: heatmap == 1 (offsets are trained here)


@TASK_UTILS.register_module()
class CornerTargetAssigner:
    """Corner heatmap and offset targets on every pyramid level.

    On each level (points of one stride), every ground-truth corner marks
    its nearest point with 1 and the sub-pixel offset from that point to
    the corner; with ``gaussian_bump`` the points within the box's CornerNet
    radius (computed in image pixels, the same on every level) get
    ``exp(-d^2 / 2 sigma^2)``, ``sigma = (2 r + 1) / 6``, the maximum over
    boxes. The heatmap is trained with a Gaussian focal loss, where such
    near-miss points are penalised less.

    Args:
        gaussian_bump (bool): soft targets around the corners.
        gaussian_iou (float): ``min_overlap`` of :func:`gaussian_radius`.
    """

    def __init__(self, gaussian_bump: bool = True, gaussian_iou: float = 0.7):
        self.gaussian_bump = gaussian_bump
        self.gaussian_iou = gaussian_iou

    def assign(self, points: Tensor, gt_bboxes: Tensor) -> CornerTargets:
        """``points``: (N, >=3) ``x, y, stride`` (mmdet's ``grid_priors``
        with strides); ``gt_bboxes``: (G, 4) ``x1, y1, x2, y2`` pixels."""
        num_points = points.size(0)
        heatmap = points.new_zeros((num_points, 2))
        offset = points.new_zeros((num_points, 4))
        if num_points == 0 or gt_bboxes.numel() == 0:
            return CornerTargets(heatmap, offset, heatmap == 1)
        gt_bboxes = gt_bboxes.to(points.dtype)
        xy, strides = points[:, :2], points[:, 2]
        if self.gaussian_bump:
            radius = gaussian_radius(gt_bboxes[:, 3] - gt_bboxes[:, 1],
                                     gt_bboxes[:, 2] - gt_bboxes[:, 0],
                                     self.gaussian_iou)
            sigma = (2 * radius + 1) / 6
        gt_index = torch.arange(gt_bboxes.size(0), device=points.device)
        for stride in strides.unique():
            on_level = torch.nonzero(strides == stride).squeeze(1)
            for col, corners in enumerate(
                (gt_bboxes[:, :2], gt_bboxes[:, 2:])):
                dist = torch.cdist(xy[on_level], corners)  # (n_lvl, G)
                if self.gaussian_bump:
                    bump = torch.exp(-dist**2 / (2 * sigma**2))
                    bump = bump.masked_fill(dist >= radius, 0).amax(dim=1)
                    heatmap[on_level, col] = torch.maximum(
                        heatmap[on_level, col], bump)
                nearest = on_level[dist.argmin(dim=0)]  # (G,)
                heatmap[nearest, col] = 1
                offset[nearest, 2 * col:2 * col + 2] = (
                    corners[gt_index] - xy[nearest]) / stride
        return CornerTargets(heatmap, offset, heatmap == 1)


def foreground_targets(gt_bboxes: Tensor, gt_labels: Tensor,
                       num_classes: int, size: Tuple[int, int],
                       stride: int) -> Tuple[Tensor, Tensor]:
    """Per-class foreground map of one image on a grid of cells of
    ``stride`` pixels: a cell belongs to a box when its row lies in
    ``floor(y1 / stride) .. floor(y2 / stride)`` and its column likewise.
    Its weight is ``1 / area`` of the smallest box of that class covering
    it, so that small objects count as much as large ones.

    Returns ``(target, weight)``, both ``(num_classes, H, W)``."""
    height, width = size
    device = gt_bboxes.device
    target = gt_bboxes.new_zeros((num_classes, height, width))
    if gt_bboxes.numel() == 0:
        return target, target.clone()
    cells = torch.div(gt_bboxes, stride, rounding_mode='floor').long()
    rows = torch.arange(height, device=device)
    cols = torch.arange(width, device=device)
    inside = (((rows[None, :] >= cells[:, 1:2]) &
               (rows[None, :] <= cells[:, 3:4]))[:, :, None]
              & ((cols[None, :] >= cells[:, 0:1]) &
                 (cols[None, :] <= cells[:, 2:3]))[:, None, :])  # (G, H, W)
    areas = ((gt_bboxes[:, 2] - gt_bboxes[:, 0]) *
             (gt_bboxes[:, 3] - gt_bboxes[:, 1])).clamp(min=1e-6)
    inv_area = inside.to(target.dtype) / areas[:, None, None]
    index = gt_labels.long()[:, None, None].expand_as(inv_area)
    weight = target.scatter_reduce(0, index, inv_area, reduce='amax')
    return (weight > 0).to(target.dtype), weight
