"""RepPoints v2 head (Chen et al., NeurIPS 2020, "RepPoints V2: Verification
Meets Regression for Object Detection") on mmdet 3.x.

mmdet's RepPoints v1 head (point sets from deformable convs, an init and a
refine stage) plus two verification branches that share one conv tower:

* foreground verification: a per-class foreground map (focal loss with
  positives and negatives normalised apart), whose embedding is added to
  the classification, localisation and corner features;
* corner verification: top-left / bottom-right corner pooling, corner
  heatmaps (Gaussian focal loss) and sub-pixel corner offsets.

The corner scores and offsets are concatenated to the inputs of both
deformable convs (classification and refinement). At inference the borders
of boxes from the coarser levels are moved to the best corner among the 2x2
heatmap cells around them on a finer level ("joint inference").
"""
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import ConvModule
from mmcv.ops import DeformConv2d
from mmdet.models.dense_heads import RepPointsHead
from mmdet.models.losses import QualityFocalLoss
from mmdet.models.task_modules.assigners import ATSSAssigner
from mmdet.models.utils import unmap
from mmdet.registry import MODELS as MMDET_MODELS
from mmdet.registry import TASK_UTILS as MMDET_TASK_UTILS
from mmdet.structures.bbox import bbox_overlaps
from mmdet.utils import InstanceList, OptInstanceList
from mmengine.config import ConfigDict
from mmengine.structures import InstanceData
from torch import Tensor

from mmvisattn.models.layers.corner_pool import CornerPoolBlock
from mmvisattn.models.task_modules import foreground_targets
from mmvisattn.registry import MODELS

GN = dict(type='GN', num_groups=32, requires_grad=True)
# outputs whose bias starts at the 1% prior of focal-loss heads
_PRIOR_INIT = [
    dict(type='Normal', name=name, std=0.01, bias_prob=0.01)
    for name in ('reppoints_cls_out', 'tl_score', 'br_score', 'fg_out')
]


class _LevelCountsAssigner:
    """mmdet's point heads call ``assigner.assign(pred, gt, ignore)``; ATSS
    also needs how many priors each pyramid level holds."""

    def __init__(self, assigner: ATSSAssigner, num_level_priors: List[int]):
        self.assigner, self.num_level_priors = assigner, num_level_priors

    def assign(self, pred_instances, gt_instances, gt_instances_ignore=None):
        return self.assigner.assign(pred_instances, self.num_level_priors,
                                    gt_instances, gt_instances_ignore)


@MODELS.register_module()
class RepPointsV2Head(RepPointsHead):
    """RepPoints v2 dense head.

    Args (beyond :class:`mmdet.models.dense_heads.RepPointsHead`'s):
        shared_stacked_convs (int): convs on the localisation tower that
            feed both verification branches.
        corner_channels (int): channels inside the corner pooling blocks.
        corner_first_kernel (int) / corner_kernel (int): kernels of the
            corner blocks' input and output convs.
        corner_refine_levels (sequence): for each pyramid level, the level
            whose corner heatmap refines its boxes at inference, or None.
            The authors' choice: P3 none, P4 and P5 from P3, P6 and P7 from
            P4.
        loss_heatmap / loss_offset / loss_fg: corner heatmap, corner offset
            and foreground losses.
        transform_method: ``'exact_minmax'`` (the authors'): the first two
            points are the box's top-left and bottom-right corners; or any
            of mmdet's (``'moment'``, ``'minmax'``, ``'partial_minmax'``).

    ``train_cfg`` needs ``init`` and ``refine`` (as RepPoints; the refine
    assigner may be ATSS) and ``heatmap=dict(assigner=...)`` (a
    :class:`CornerTargetAssigner`).
    """

    def __init__(self,
                 num_classes: int,
                 in_channels: int,
                 shared_stacked_convs: int = 1,
                 corner_channels: int = 64,
                 corner_first_kernel: int = 3,
                 corner_kernel: int = 1,
                 corner_refine_levels: Sequence[Optional[int]] = (None, 0, 0,
                                                                  1, 1),
                 loss_heatmap: dict = dict(
                     type='GaussianFocalLoss',
                     alpha=2.0,
                     gamma=4.0,
                     loss_weight=0.25),
                 loss_offset: dict = dict(
                     type='SmoothL1Loss', beta=1.0 / 9.0, loss_weight=1.0),
                 loss_fg: dict = dict(
                     type='mmvisattn.SeparateFocalLoss',
                     gamma=2.0,
                     alpha=0.25,
                     loss_weight=0.1),
                 transform_method: str = 'exact_minmax',
                 norm_cfg: Optional[dict] = GN,
                 init_cfg: dict = dict(
                     type='Normal',
                     layer=['Conv2d', 'DeformConv2d'],
                     std=0.01,
                     override=_PRIOR_INIT),
                 **kwargs) -> None:
        if kwargs.get('use_grid_points') or not kwargs.get(
                'center_init', True):
            raise ValueError('RepPointsV2Head predicts point sets from the '
                             'location (center_init=True, '
                             'use_grid_points=False)')
        self.shared_stacked_convs = shared_stacked_convs
        self.corner_channels = corner_channels
        self.corner_first_kernel = corner_first_kernel
        self.corner_kernel = corner_kernel
        super().__init__(
            num_classes,
            in_channels,
            transform_method=transform_method,
            norm_cfg=norm_cfg,
            init_cfg=init_cfg,
            **kwargs)
        if len(corner_refine_levels) != len(self.point_strides):
            raise ValueError(
                f'corner_refine_levels has {len(corner_refine_levels)} '
                f'entries, one per level of point_strides '
                f'{list(self.point_strides)} is needed')
        self.corner_refine_levels = tuple(corner_refine_levels)
        self.loss_heatmap = MMDET_MODELS.build(loss_heatmap)
        self.loss_offset = MMDET_MODELS.build(loss_offset)
        self.loss_fg = MMDET_MODELS.build(loss_fg)
        if self.train_cfg:
            if 'heatmap' not in self.train_cfg:
                raise KeyError('RepPointsV2Head: train_cfg needs a '
                               "'heatmap' entry with the corner assigner, "
                               "e.g. heatmap=dict(assigner=dict("
                               "type='mmvisattn.CornerTargetAssigner'))")
            self.corner_assigner = MMDET_TASK_UTILS.build(
                self.train_cfg['heatmap']['assigner'])

    def _init_layers(self) -> None:
        super()._init_layers()
        conv = dict(conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg)
        self.shared_convs = nn.ModuleList(
            ConvModule(self.feat_channels, self.feat_channels, 3, padding=1,
                       **conv) for _ in range(self.shared_stacked_convs))
        # foreground verification
        self.fg_out = nn.Conv2d(self.feat_channels, self.cls_out_channels, 1)
        self.fg_embed = ConvModule(self.feat_channels, self.feat_channels, 1,
                                   **conv)
        # corner verification
        corner = dict(
            corner_channels=self.corner_channels,
            first_kernel_size=self.corner_first_kernel,
            kernel_size=self.corner_kernel,
            **conv)
        self.tl_pool = CornerPoolBlock(self.feat_channels, 'top_left',
                                       **corner)
        self.br_pool = CornerPoolBlock(self.feat_channels, 'bottom_right',
                                       **corner)
        self.tl_score = nn.Conv2d(self.feat_channels, 1, 3, padding=1)
        self.br_score = nn.Conv2d(self.feat_channels, 1, 3, padding=1)
        self.tl_offset = nn.Conv2d(self.feat_channels, 2, 3, padding=1)
        self.br_offset = nn.Conv2d(self.feat_channels, 2, 3, padding=1)
        # both deformable convs also see the 6 corner maps (2 scores, 4
        # offsets)
        self.reppoints_cls_conv = DeformConv2d(self.feat_channels + 6,
                                               self.point_feat_channels,
                                               self.dcn_kernel, 1,
                                               self.dcn_pad)
        self.reppoints_pts_refine_conv = DeformConv2d(
            self.feat_channels + 6, self.point_feat_channels, self.dcn_kernel,
            1, self.dcn_pad)

    def init_weights(self) -> None:
        super().init_weights()
        # As the authors' head: their init list leaves the corner pooling
        # blocks out, so those keep ConvModule's own (Kaiming) init rather
        # than N(0, 0.01). (fg_embed, a direct child ConvModule, is
        # re-initialised that way by mmengine already.)
        for pool in (self.tl_pool, self.br_pool):
            for module in pool.modules():
                if isinstance(module, ConvModule):
                    module.init_weights()

    def points2bbox(self, pts: Tensor, y_first: bool = True) -> Tensor:
        if self.transform_method != 'exact_minmax':
            return super().points2bbox(pts, y_first)
        # the first two points are the top-left and bottom-right corners
        pts = pts.view(pts.shape[0], -1, 2, *pts.shape[2:])[:, :2]
        y, x = (pts[:, :, 0], pts[:, :, 1]) if y_first else (pts[:, :, 1],
                                                             pts[:, :, 0])
        return torch.cat([x[:, 0:1], y[:, 0:1], x[:, 1:2], y[:, 1:2]], dim=1)

    def forward_single(self, x: Tensor) -> Tuple[Tensor, ...]:
        """One level: ``(cls_score, pts_init, pts_refine, corner_score
        (B, 2, H, W) tl/br logits, corner_offset (B, 4, H, W) tl xy / br
        xy, fg_score (B, num_classes, H, W) logits)``, in training and in
        inference alike (inference decodes the refined points)."""
        dcn_base_offset = self.dcn_base_offset.type_as(x)
        cls_feat, pts_feat = x, x
        for conv in self.cls_convs:
            cls_feat = conv(cls_feat)
        for conv in self.reg_convs:
            pts_feat = conv(pts_feat)
        shared_feat = pts_feat
        for conv in self.shared_convs:
            shared_feat = conv(shared_feat)

        fg_score = self.fg_out(shared_feat)
        fg_feat = self.fg_embed(shared_feat)
        cls_feat = cls_feat + fg_feat
        pts_feat = pts_feat + fg_feat
        corner_feat = shared_feat + fg_feat
        tl_feat, br_feat = self.tl_pool(corner_feat), self.br_pool(corner_feat)
        corner_score = torch.cat(
            [self.tl_score(tl_feat), self.br_score(br_feat)], dim=1)
        corner_offset = torch.cat(
            [self.tl_offset(tl_feat), self.br_offset(br_feat)], dim=1)
        corner_maps = torch.cat([corner_score, corner_offset], dim=1)

        pts_init = self.reppoints_pts_init_out(
            self.relu(self.reppoints_pts_init_conv(pts_feat)))
        # the deformable convs sample at the init points; their gradient to
        # the init branch is scaled down by gradient_mul
        pts_init_grad_mul = (1 - self.gradient_mul) * pts_init.detach() + \
            self.gradient_mul * pts_init
        dcn_offset = pts_init_grad_mul - dcn_base_offset
        cls_score = self.reppoints_cls_out(
            self.relu(
                self.reppoints_cls_conv(
                    torch.cat([cls_feat, corner_maps], dim=1), dcn_offset)))
        pts_refine = self.reppoints_pts_refine_out(
            self.relu(
                self.reppoints_pts_refine_conv(
                    torch.cat([pts_feat, corner_maps], dim=1), dcn_offset)))
        pts_refine = pts_refine + pts_init.detach()
        return (cls_score, pts_init, pts_refine, corner_score, corner_offset,
                fg_score)

    # ------------------------------------------------------------ training
    def _get_targets_single(self,
                            flat_proposals: Tensor,
                            valid_flags: Tensor,
                            gt_instances: InstanceData,
                            gt_instances_ignore: InstanceData,
                            stage: str = 'init',
                            unmap_outputs: bool = True) -> tuple:
        name = 'init_assigner' if stage == 'init' else 'refine_assigner'
        assigner = getattr(self, name)
        if not isinstance(assigner, ATSSAssigner):
            return super()._get_targets_single(flat_proposals, valid_flags,
                                               gt_instances,
                                               gt_instances_ignore, stage,
                                               unmap_outputs)
        # ATSS picks its candidates level by level: the valid priors of
        # this image on each level
        counts = [int(v.sum()) for v in valid_flags.split(self._level_sizes)]
        setattr(self, name, _LevelCountsAssigner(assigner, counts))
        try:
            return super()._get_targets_single(flat_proposals, valid_flags,
                                               gt_instances,
                                               gt_instances_ignore, stage,
                                               unmap_outputs)
        finally:
            setattr(self, name, assigner)

    def loss_by_feat_single(self, cls_score: Tensor, pts_pred_init: Tensor,
                            pts_pred_refine: Tensor, labels: Tensor,
                            label_weights: Tensor, bbox_gt_init: Tensor,
                            bbox_weights_init: Tensor, bbox_gt_refine: Tensor,
                            bbox_weights_refine: Tensor, stride: int,
                            avg_factor_init: int,
                            avg_factor_refine: int) -> Tuple[Tensor, ...]:
        """mmdet's RepPoints losses of one level, plus a quality focal loss
        (``loss_cls=dict(type='QualityFocalLoss', ...)``, the Swin authors'
        Table 2 model) whose positive targets are the IoU of the refined box
        with its ground truth (detached), as their ``RPDQualityFocalLoss``.
        """
        labels = labels.reshape(-1)
        label_weights = label_weights.reshape(-1)
        cls_score = cls_score.permute(0, 2, 3, 1).reshape(
            -1, self.cls_out_channels).contiguous()
        bbox_pred_init = self.points2bbox(
            pts_pred_init.reshape(-1, 2 * self.num_points), y_first=False)
        bbox_pred_refine = self.points2bbox(
            pts_pred_refine.reshape(-1, 2 * self.num_points), y_first=False)
        bbox_gt_init = bbox_gt_init.reshape(-1, 4)
        bbox_gt_refine = bbox_gt_refine.reshape(-1, 4)
        if isinstance(self.loss_cls, QualityFocalLoss):
            cls_target = (labels,
                          self.refined_box_quality(labels, bbox_pred_refine,
                                                   bbox_gt_refine))
        else:
            cls_target = labels
        loss_cls = self.loss_cls(
            cls_score, cls_target, label_weights, avg_factor=avg_factor_refine)
        # boxes in units of 4 x stride (RepPoints' normalisation)
        normalize_term = self.point_base_scale * stride
        loss_pts_init = self.loss_bbox_init(
            bbox_pred_init / normalize_term,
            bbox_gt_init / normalize_term,
            bbox_weights_init.reshape(-1, 4),
            avg_factor=avg_factor_init)
        loss_pts_refine = self.loss_bbox_refine(
            bbox_pred_refine / normalize_term,
            bbox_gt_refine / normalize_term,
            bbox_weights_refine.reshape(-1, 4),
            avg_factor=avg_factor_refine)
        return loss_cls, loss_pts_init, loss_pts_refine

    def refined_box_quality(self, labels: Tensor, bbox_pred: Tensor,
                            bbox_gt: Tensor) -> Tensor:
        """Soft classification targets: at positives (``0 <= label <
        num_classes``) the IoU of the predicted box with its ground truth,
        elsewhere 0; no gradient."""
        quality = bbox_pred.new_zeros(labels.shape)
        positive = (labels >= 0) & (labels < self.num_classes)
        if positive.any():
            quality[positive] = bbox_overlaps(
                bbox_pred[positive].detach(), bbox_gt[positive],
                is_aligned=True).clamp(min=0)
        return quality

    def get_corner_targets(self, points: List[Tensor], valid_flags: List[Tensor],
                           batch_gt_instances: InstanceList) -> tuple:
        """Corner heatmap/offset targets of a batch, flat over levels:
        ``heatmap (B, N, 2)``, ``offset (B, N, 4)``, ``positive (B, N, 2)``,
        ``valid (B, N)``; only points inside the padded image are assigned
        (others get no loss)."""
        heatmaps, offsets, positives = [], [], []
        for flat_points, valid, gt in zip(points, valid_flags,
                                          batch_gt_instances):
            targets = self.corner_assigner.assign(flat_points[valid],
                                                  gt.bboxes)
            num = flat_points.size(0)
            heatmaps.append(unmap(targets.heatmap, num, valid))
            offsets.append(unmap(targets.offset, num, valid))
            positives.append(unmap(targets.positive, num, valid).bool())
        return (torch.stack(heatmaps), torch.stack(offsets),
                torch.stack(positives), torch.stack(valid_flags))

    def get_foreground_targets(self, size: Tuple[int, int],
                               batch_gt_instances: InstanceList) -> tuple:
        """Foreground maps on the finest level's grid: ``(target, weight)``,
        each ``(B, num_classes, H, W)``."""
        targets = [
            foreground_targets(gt.bboxes, gt.labels, self.cls_out_channels,
                               size, self.point_strides[0])
            for gt in batch_gt_instances
        ]
        return (torch.stack([t for t, _ in targets]),
                torch.stack([w for _, w in targets]))

    def loss_by_feat(
        self,
        cls_scores: List[Tensor],
        pts_preds_init: List[Tensor],
        pts_preds_refine: List[Tensor],
        corner_scores: List[Tensor],
        corner_offsets: List[Tensor],
        fg_scores: List[Tensor],
        batch_gt_instances: InstanceList,
        batch_img_metas: List[dict],
        batch_gt_instances_ignore: OptInstanceList = None
    ) -> Dict[str, Tensor]:
        featmap_sizes = [f.shape[-2:] for f in cls_scores]
        self._level_sizes = [h * w for h, w in featmap_sizes]
        # classification and the two point-set stages: RepPoints v1's
        losses = super().loss_by_feat(cls_scores, pts_preds_init,
                                      pts_preds_refine, batch_gt_instances,
                                      batch_img_metas,
                                      batch_gt_instances_ignore)
        losses.update(
            self._corner_losses(corner_scores, corner_offsets, featmap_sizes,
                                batch_gt_instances, batch_img_metas))
        losses['loss_fg'] = self._foreground_loss(fg_scores,
                                                  batch_gt_instances)
        return losses

    def _corner_losses(self, corner_scores, corner_offsets, featmap_sizes,
                       batch_gt_instances, batch_img_metas) -> dict:
        device = corner_scores[0].device
        points, valid_flags = self.get_points(featmap_sizes, batch_img_metas,
                                              device)
        heatmap, offset, positive, valid = self.get_corner_targets(
            [torch.cat(p) for p in points], [torch.cat(v) for v in valid_flags],
            batch_gt_instances)
        # (B, C, H, W) per level -> (B, N, C), levels concatenated as points
        score = torch.cat([s.flatten(2) for s in corner_scores], 2).transpose(
            1, 2)
        pred_offset = torch.cat([o.flatten(2) for o in corner_offsets],
                                2).transpose(1, 2)
        loss_heatmap, loss_offset = 0, 0
        for col in range(2):  # top-left, bottom-right
            # as the authors: per image max(positives, 1), summed
            num_pos = float(positive[..., col].sum(1).clamp(min=1).sum())
            loss_heatmap = loss_heatmap + self.loss_heatmap(
                score[..., col][valid].sigmoid(),
                heatmap[..., col][valid],
                avg_factor=num_pos)
            xy = slice(2 * col, 2 * col + 2)
            weight = positive[..., col:col + 1].expand(-1, -1, 2).float()
            loss_offset = loss_offset + self.loss_offset(
                pred_offset[..., xy], offset[..., xy], weight,
                avg_factor=num_pos)
        return dict(loss_heatmap=loss_heatmap / 2, loss_offset=loss_offset / 2)

    def _foreground_loss(self, fg_scores, batch_gt_instances) -> Tensor:
        target, weight = self.get_foreground_targets(fg_scores[0].shape[-2:],
                                                     batch_gt_instances)
        preds, targets, weights = [], [], []
        for score in fg_scores:
            # coarser levels: the finest map, nearest-resized
            preds.append(score.flatten())
            targets.append(F.interpolate(target, score.shape[-2:]).flatten())
            weights.append(F.interpolate(weight, score.shape[-2:]).flatten())
        targets = torch.cat(targets)
        return self.loss_fg(
            torch.cat(preds), targets, torch.cat(weights),
            avg_factor=max(float(targets.sum()), 1.0))

    # ----------------------------------------------------------- inference
    def predict_by_feat(self,
                        cls_scores: List[Tensor],
                        pts_preds_init: List[Tensor],
                        pts_preds_refine: List[Tensor],
                        corner_scores: List[Tensor],
                        corner_offsets: List[Tensor],
                        fg_scores: List[Tensor],
                        batch_img_metas: Optional[List[dict]] = None,
                        cfg: Optional[ConfigDict] = None,
                        rescale: bool = False,
                        with_nms: bool = True) -> InstanceList:
        cfg = self.test_cfg if cfg is None else cfg
        featmap_sizes = [s.shape[-2:] for s in cls_scores]
        mlvl_priors = self.prior_generator.grid_priors(
            featmap_sizes, dtype=cls_scores[0].dtype,
            device=cls_scores[0].device)
        bbox_preds = [self.points2bbox(p) for p in pts_preds_refine]
        results = []
        for img_id, img_meta in enumerate(batch_img_metas):
            results.append(
                self._predict_single_image(
                    [s[img_id].detach() for s in cls_scores],
                    [b[img_id].detach() for b in bbox_preds],
                    [s[img_id].detach() for s in corner_scores],
                    [o[img_id].detach() for o in corner_offsets],
                    mlvl_priors, img_meta, cfg, rescale, with_nms))
        return results

    def _predict_single_image(self, cls_scores, bbox_preds, corner_scores,
                              corner_offsets, mlvl_priors, img_meta, cfg,
                              rescale, with_nms) -> InstanceData:
        img_shape = img_meta['img_shape']
        nms_pre = cfg.get('nms_pre', -1)
        bboxes, scores, labels = [], [], []
        for level, (cls_score, bbox_pred, priors) in enumerate(
                zip(cls_scores, bbox_preds, mlvl_priors)):
            score = cls_score.permute(1, 2, 0).reshape(-1,
                                                       self.cls_out_channels)
            score = score.sigmoid() if self.use_sigmoid_cls else \
                score.softmax(-1)[:, :-1]
            bbox_pred = bbox_pred.permute(1, 2, 0).reshape(-1, 4)
            # as the authors: the nms_pre locations of highest class score
            # first, then every (location, class) above score_thr
            if 0 < nms_pre < score.shape[0]:
                keep = score.max(dim=1)[0].topk(nms_pre)[1]
                score, bbox_pred, priors = (score[keep], bbox_pred[keep],
                                            priors[keep])
            location, label = (score > cfg.score_thr).nonzero(as_tuple=True)
            score = score[location, label]
            box = self._bbox_decode(priors[location], bbox_pred[location],
                                    self.point_strides[level], img_shape)
            source = self.corner_refine_levels[level]
            if source is not None:
                box = self.refine_with_corners(box, corner_scores[source],
                                               corner_offsets[source],
                                               self.point_strides[source],
                                               img_shape)
            bboxes.append(box)
            scores.append(score)
            labels.append(label)
        results = InstanceData(
            bboxes=torch.cat(bboxes),
            scores=torch.cat(scores),
            labels=torch.cat(labels))
        return self._bbox_post_process(
            results=results,
            cfg=cfg,
            rescale=rescale,
            with_nms=with_nms,
            img_meta=img_meta)

    @staticmethod
    def refine_with_corners(bboxes: Tensor, corner_score: Tensor,
                            corner_offset: Tensor, stride: int,
                            img_shape: Tuple[int, int]) -> Tensor:
        """Move each box's top-left and bottom-right corners to the
        highest-scoring heatmap cell among the 2x2 cells around them,
        plus that cell's predicted sub-pixel offset.

        ``bboxes (K, 4)`` pixels; ``corner_score (2, H, W)``,
        ``corner_offset (4, H, W)`` of one image on a level of ``stride``.
        """
        height, width = corner_score.shape[-2:]
        refined = []
        for col in range(2):
            # the 2x2 window's top-left cell, kept inside the map as the
            # authors' 2x2 max-pool (no padding) does: at most W-2, H-2
            x0 = (bboxes[:, 2 * col] / stride).clamp(
                0, max(width - 2, 0)).floor().long()
            y0 = (bboxes[:, 2 * col + 1] / stride).clamp(
                0, max(height - 2, 0)).floor().long()
            x1 = (x0 + 1).clamp(max=width - 1)
            y1 = (y0 + 1).clamp(max=height - 1)
            cand_x = torch.stack([x0, x1, x0, x1], dim=1)  # (K, 4)
            cand_y = torch.stack([y0, y0, y1, y1], dim=1)
            best = corner_score[col][cand_y, cand_x].argmax(dim=1,
                                                            keepdim=True)
            cx = cand_x.gather(1, best).squeeze(1)
            cy = cand_y.gather(1, best).squeeze(1)
            refined.append(
                ((cx + corner_offset[2 * col, cy, cx]) * stride).clamp(
                    0, img_shape[1]))
            refined.append(
                ((cy + corner_offset[2 * col + 1, cy, cx]) * stride).clamp(
                    0, img_shape[0]))
        return torch.stack(refined, dim=1)
