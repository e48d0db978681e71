"""Test-time augmentation for instance segmentation (HTC++'s multi-scale test).

Import ``mmvisattn.models.test_time_augs`` (e.g. through ``custom_imports``)
to register ``mmvisattn.InstanceSegTTAModel``; it imports mmdet.
"""
import torch
from mmcv.ops import batched_nms
from mmdet.models.test_time_augs import DetTTAModel
from mmdet.structures.bbox import bbox_flip
from mmengine.structures import InstanceData

from mmvisattn.registry import MODELS

FLIP_DIMS = {'horizontal': (-1, ), 'vertical': (-2, ), 'diagonal': (-2, -1)}


@MODELS.register_module()
class InstanceSegTTAModel(DetTTAModel):
    """mmdet's ``DetTTAModel`` (boxes only in mmdet 3.3) with masks.

    Every view's boxes and masks are flipped back to the original image,
    all views are merged by ``tta_cfg.nms`` (nms or soft_nms, per class)
    and each surviving detection keeps the mask its own view predicted.
    This merges final results; it does not average boxes or mask
    probabilities inside the RoI heads as mmdet 2.x's HTC aug_test did.

    The detector runs every view with ``flip=False`` in its metainfo:
    mmdet 3.3's Cascade and HTC heads average their stages' masks with
    ``merge_aug_masks``, which flips (and then fails on) a flipped view's
    RoI masks. The flips are restored for merging.
    """

    def test_step(self, data):
        samples = data['data_samples']  # [view][image]
        flips = [[(s.metainfo.get('flip', False),
                   s.metainfo.get('flip_direction')) for s in view]
                 for view in samples]
        predictions = []
        for idx, view_flips in enumerate(flips):
            for sample in samples[idx]:
                sample.set_metainfo(dict(flip=False, flip_direction=None))
            preds = self.module.test_step(
                {key: value[idx] for key, value in data.items()})
            for pred, (flip, direction) in zip(preds, view_flips):
                pred.set_metainfo(dict(flip=flip,
                                       flip_direction=direction))
            predictions.append(preds)
        return self.merge_preds(list(zip(*predictions)))

    def _merge_single_sample(self, data_samples):
        if data_samples[0].pred_instances.get('masks', None) is None:
            return super()._merge_single_sample(data_samples)
        bboxes, scores, labels, masks = [], [], [], []
        for sample in data_samples:
            pred = sample.pred_instances
            box, mask = pred.bboxes, pred.masks
            if sample.metainfo.get('flip', False):
                direction = sample.metainfo['flip_direction']
                box = bbox_flip(box, sample.metainfo['ori_shape'],
                                direction)
                mask = mask.flip(FLIP_DIMS[direction])
            bboxes.append(box)
            scores.append(pred.scores)
            labels.append(pred.labels)
            masks.append(mask)
        bboxes, scores = torch.cat(bboxes), torch.cat(scores)
        labels, masks = torch.cat(labels), torch.cat(masks)
        merged = data_samples[0]
        if bboxes.numel() == 0:
            return merged
        dets, keep = batched_nms(bboxes, scores, labels, self.tta_cfg.nms)
        dets = dets[:self.tta_cfg.max_per_img]
        keep = keep[:self.tta_cfg.max_per_img]
        merged.pred_instances = InstanceData(
            bboxes=dets[:, :-1], scores=dets[:, -1], labels=labels[keep],
            masks=masks[keep])
        return merged
