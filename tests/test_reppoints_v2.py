"""RepPoints v2 on mmdet 3.x: the verification targets on hand-made boxes,
the corner pooling block, the losses, one-image training and inference.

The detector is the zoo's (configs/_base_/models/reppoints-v2_r50_fpn_giou.py)
with a ResNet-18 backbone so that a few steps run in seconds; the zoo
configs themselves train and evaluate on coco128 in tests/test_zoo_coco.py.
"""
import copy
import math
import os.path as osp

import pytest
import torch
from mmdet.models.utils.gaussian_target import (
    gaussian_radius as mmdet_gaussian_radius,
)
from mmdet.structures import DetDataSample
from mmengine.config import Config
from mmengine.structures import InstanceData

from helpers import REPO
from mmvisattn.models.dense_heads import RepPointsV2Head
from mmvisattn.models.layers import CornerPoolBlock
from mmvisattn.models.losses import SeparateFocalLoss, separate_focal_loss
from mmvisattn.models.task_modules import (
    CornerTargetAssigner,
    foreground_targets,
    gaussian_radius,
)

BASE = osp.join(REPO, 'configs', '_base_', 'models',
                'reppoints-v2_r50_fpn_giou.py')


def grid_points(height, width, stride):
    """(N, 4) x, y, stride, stride as mmdet's grid_priors(with_stride)."""
    ys, xs = torch.meshgrid(
        torch.arange(height) * stride, torch.arange(width) * stride,
        indexing='ij')
    xy = torch.stack([xs.flatten(), ys.flatten()], 1).float()
    return torch.cat([xy, torch.full_like(xy, stride)], 1)


# ---------------------------------------------------------------- targets
def test_gaussian_radius_is_cornernets_on_tensors():
    hw = [(10., 10.), (37., 120.), (300., 8.), (1., 1.)]
    ours = gaussian_radius(torch.tensor([h for h, _ in hw]),
                           torch.tensor([w for _, w in hw]), 0.7)
    for (h, w), r in zip(hw, ours.tolist()):
        assert r == pytest.approx(mmdet_gaussian_radius((h, w), 0.7),
                                  rel=1e-5)


def test_corner_heatmap_peaks_at_the_corners_with_cornernet_radius():
    stride = 8
    points = grid_points(32, 32, stride)
    box = torch.tensor([[13., 21., 205., 181.]])  # 192 x 160
    targets = CornerTargetAssigner(gaussian_iou=0.7).assign(points, box)
    heat = targets.heatmap.view(32, 32, 2)
    # nearest points: (16, 24) for the top-left, (208, 184) bottom-right
    assert heat[3, 2, 0] == 1 and heat[23, 26, 1] == 1
    assert targets.positive.sum(0).tolist() == [1, 1]
    assert torch.equal(targets.positive, targets.heatmap == 1)
    # sub-pixel offsets from that point to the corner, in strides
    offset = targets.offset.view(32, 32, 4)
    assert offset[3, 2, :2].tolist() == pytest.approx([-3 / 8, -3 / 8])
    assert offset[23, 26, 2:].tolist() == pytest.approx([-3 / 8, -3 / 8])
    assert (targets.offset.abs().sum(1) > 0).sum() == 2
    # the bump: exp(-d^2 / 2 sigma^2) inside the radius, 0 beyond it
    radius = mmdet_gaussian_radius((160, 192), 0.7)  # 15.6 px
    sigma = (2 * radius + 1) / 6
    corner = torch.tensor([13., 21.])
    dist = (points[:, :2] - corner).norm(dim=1)
    expected = torch.exp(-dist**2 / (2 * sigma**2)) * (dist < radius)
    expected[dist.argmin()] = 1
    assert torch.allclose(targets.heatmap[:, 0], expected, atol=1e-6)
    # a bump over the points within 15.6 px, not a dot
    assert (targets.heatmap[:, 0] > 0).sum() == (dist < radius).sum() > 4
    # without the bump only the peaks remain
    hard = CornerTargetAssigner(gaussian_bump=False).assign(points, box)
    assert hard.heatmap.sum(0).tolist() == [1, 1]


def test_corner_targets_on_every_level_and_empty_images():
    points = torch.cat([grid_points(8, 8, 8), grid_points(4, 4, 16)])
    box = torch.tensor([[10., 10., 50., 40.]])
    targets = CornerTargetAssigner().assign(points, box)
    # one peak per corner on each of the two levels
    assert targets.positive.sum(0).tolist() == [2, 2]
    # level 2: top-left nearest point (16, 16): offset (10-16)/16
    lvl2 = targets.offset[64:].view(4, 4, 4)
    assert lvl2[1, 1, :2].tolist() == pytest.approx([-6 / 16, -6 / 16])
    empty = CornerTargetAssigner().assign(points, torch.zeros((0, 4)))
    assert empty.heatmap.shape == (80, 2) and empty.heatmap.sum() == 0
    assert not empty.positive.any()


def test_foreground_map_covers_the_box_with_inverse_area_weights():
    boxes = torch.tensor([[8., 16., 40., 31.],   # class 2, 32 x 15
                          [0., 0., 63., 63.],    # class 2, covers all
                          [20., 20., 30., 30.]])  # class 5
    labels = torch.tensor([2, 2, 5])
    target, weight = foreground_targets(boxes, labels, 7, (8, 8), 8)
    assert target.shape == weight.shape == (7, 8, 8)
    # cells floor(x1/8)..floor(x2/8): columns 1..5, rows 2..3
    small = torch.zeros(8, 8, dtype=torch.bool)
    small[2:4, 1:6] = True
    assert target[2].all()  # the big box covers the whole map
    assert torch.allclose(weight[2][small], torch.tensor(1 / (32 * 15)))
    assert torch.allclose(weight[2][~small], torch.tensor(1 / 63**2))
    cls5 = torch.zeros(8, 8, dtype=torch.bool)
    cls5[2:4, 2:4] = True
    assert torch.equal(target[5].bool(), cls5)
    assert target[[0, 1, 3, 4, 6]].sum() == 0 and weight[0].sum() == 0
    empty_t, empty_w = foreground_targets(
        torch.zeros((0, 4)), torch.zeros((0, ), dtype=torch.long), 3, (4, 4),
        8)
    assert empty_t.sum() == 0 and empty_w.shape == (3, 4, 4)


# ----------------------------------------------------------------- layers
def test_corner_pool_block_sees_what_lies_right_and_below():
    block = CornerPoolBlock(32, 'top_left', corner_channels=8,
                            norm_cfg=dict(type='GN', num_groups=4))
    x = torch.randn(2, 32, 9, 11)
    assert block(x).shape == x.shape
    # mmcv's pools: top-left = max over everything below (top pool) plus
    # max over everything to the right (left pool)
    top, left = block.pools
    z = torch.zeros(1, 1, 4, 4)
    z[0, 0, 3, 3] = 1.
    assert top(z)[0, 0, :, 3].tolist() == [1, 1, 1, 1]
    assert left(z)[0, 0, 3, :].tolist() == [1, 1, 1, 1]
    assert top(z)[0, 0, :, :3].sum() == 0
    with pytest.raises(ValueError, match='corner must be one of'):
        CornerPoolBlock(32, 'top_right')


def test_separate_focal_loss_normalises_positives_and_negatives_apart():
    logits = torch.tensor([2., -1., 0.5, -3.])
    target = torch.tensor([1., 0., 1., 0.])
    weight = torch.tensor([0.25, 0., 0.75, 0.])
    p = logits.sigmoid()
    pos = -0.25 * (1 - p)**2 * p.log()
    neg = -0.75 * p**2 * (1 - p).log()
    expected = (pos[0] * 0.25 + pos[2] * 0.75) / 1.0 + (neg[1] + neg[3]) / 2
    assert separate_focal_loss(logits, target, weight, 2.0) == \
        pytest.approx(float(expected), rel=1e-5)
    loss = SeparateFocalLoss(loss_weight=0.1)
    assert loss(logits, target, weight, avg_factor=2.0) == pytest.approx(
        0.1 * float(expected), rel=1e-5)
    # saturated logits stay finite
    big = torch.tensor([80., -80.])
    assert torch.isfinite(
        separate_focal_loss(-big, torch.tensor([1., 0.]),
                            torch.ones(2), 1.0))
    with pytest.raises(ValueError, match='same shape'):
        loss(logits, target[:3], weight)


def test_joint_inference_moves_borders_to_the_best_nearby_corner():
    stride = 8
    score = torch.full((2, 10, 10), -5.)
    offset = torch.zeros(4, 10, 10)
    # top-left corner cell (x=3, y=2) with offset (0.25, 0.5); bottom-right
    # cell (x=7, y=6) with offset (-0.5, 0)
    score[0, 2, 3] = 5.
    offset[0:2, 2, 3] = torch.tensor([0.25, 0.5])
    score[1, 6, 7] = 5.
    offset[2:4, 6, 7] = torch.tensor([-0.5, 0.])
    # the box's corners lie inside the 2x2 cells around those peaks
    box = torch.tensor([[2.6 * stride, 1.2 * stride, 6.5 * stride,
                         5.9 * stride]])
    refined = RepPointsV2Head.refine_with_corners(box, score, offset, stride,
                                                  (80, 80))
    assert refined[0].tolist() == pytest.approx(
        [3.25 * stride, 2.5 * stride, 6.5 * stride, 6 * stride])
    # a corner two cells away from the peak is not pulled to it
    far = torch.tensor([[0.5 * stride, 0.2 * stride, 9.9 * stride,
                         9.9 * stride]])
    moved = RepPointsV2Head.refine_with_corners(far, score, offset, stride,
                                                (80, 80))
    assert moved[0, 0] < 2 * stride and moved[0, 2] >= 8 * stride
    # at the border the window is the last 2x2 cells (the authors' 2x2
    # max-pool without padding): a peak on the last cell is found from a
    # corner beyond the map, and nothing is looked up outside it
    score[1, 9, 9] = 5.
    moved = RepPointsV2Head.refine_with_corners(far, score, offset, stride,
                                                (80, 80))
    assert moved[0, 2:].tolist() == [9 * stride, 9 * stride]
    # clipped to the image, also on a 1-cell map
    one = RepPointsV2Head.refine_with_corners(
        torch.tensor([[3., 3., 100., 100.]]), score[:, :1, :1],
        offset[:, :1, :1], stride, (20, 30))
    assert one.tolist() == [[0., 0., 0., 0.]]


# -------------------------------------------------------- detector, steps
def _model_cfg(**head):
    cfg = Config.fromfile(BASE)
    model = copy.deepcopy(cfg.model)
    model.backbone.update(depth=18, init_cfg=None)
    model.neck.in_channels = [64, 128, 256, 512]
    model.bbox_head.update(num_classes=8, **head)
    model.test_cfg.update(score_thr=0.0, max_per_img=20)
    return model


@pytest.fixture(scope='module')
def detector():
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(_model_cfg())
    model.init_weights()
    return model


def _sample(h, w, boxes, labels, pad=None):
    pad = pad or (h, w)
    sample = DetDataSample(metainfo=dict(
        img_shape=(h, w), pad_shape=(h, w), batch_input_shape=pad,
        ori_shape=(h, w), scale_factor=(1., 1.)))
    sample.gt_instances = InstanceData(
        bboxes=torch.tensor(boxes, dtype=torch.float32),
        labels=torch.tensor(labels))
    return sample


def _image_with_boxes(h, w, boxes):
    torch.manual_seed(1)
    img = torch.randn(1, 3, h, w) * 0.1
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        img[0, i % 3, int(y1):int(y2), int(x1):int(x2)] += 2.
    return img


@pytest.mark.slow  # six optimizer steps by hand: training
def test_loss_is_finite_and_decreases_on_one_image(detector):
    boxes = [[30., 40., 150., 200.], [200., 20., 300., 90.]]
    img = _image_with_boxes(256, 320, boxes)
    sample = _sample(256, 320, boxes, [3, 7])
    model = copy.deepcopy(detector).train()
    optim = torch.optim.AdamW(model.parameters(), lr=2e-4)
    totals = []
    for _ in range(6):
        losses = model.loss(img, [sample])
        assert set(losses) == {'loss_cls', 'loss_pts_init',
                               'loss_pts_refine', 'loss_heatmap',
                               'loss_offset', 'loss_fg'}
        total = sum(v if torch.is_tensor(v) else sum(v)
                    for v in losses.values())
        assert torch.isfinite(total)
        optim.zero_grad()
        total.backward()
        optim.step()
        totals.append(float(total))
    assert totals[-1] < 0.8 * totals[0], totals
    # the verification branches learn too
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in (model.bbox_head.tl_score.weight,
                         model.bbox_head.fg_out.weight,
                         model.bbox_head.tl_pool.reduce_convs[0].conv.weight))


def test_loss_on_a_padded_batch_and_an_image_without_objects(detector):
    """Two images of different sizes in one padded batch (points outside
    the smaller one are invalid; ATSS counts the valid ones per level), the
    second without any box."""
    model = copy.deepcopy(detector).train()
    img = torch.randn(2, 3, 224, 288)
    samples = [_sample(224, 288, [[10., 20., 120., 100.]], [1]),
               _sample(160, 192, [], [], pad=(224, 288))]
    samples[1].gt_instances.bboxes = torch.zeros((0, 4))
    samples[1].gt_instances.labels = torch.zeros((0, ), dtype=torch.long)
    losses = model.loss(img, samples)
    total = sum(v if torch.is_tensor(v) else sum(v) for v in losses.values())
    assert torch.isfinite(total)
    total.backward()


def test_inference_returns_boxes_scores_labels(detector):
    model = detector.eval()
    img = torch.randn(2, 3, 192, 256)
    samples = [_sample(192, 256, [], []), _sample(150, 256, [], [])]
    with torch.no_grad():
        results = model.predict(img, samples, rescale=False)
    assert len(results) == 2
    for sample, result in zip(samples, results):
        pred = result.pred_instances
        n = len(pred)
        assert 0 < n <= 20
        assert pred.bboxes.shape == (n, 4) and pred.scores.shape == (n, )
        assert pred.labels.shape == (n, ) and pred.labels.dtype == torch.long
        assert ((pred.labels >= 0) & (pred.labels < 8)).all()
        h, w = sample.metainfo['img_shape']
        assert (pred.bboxes[:, 0::2] <= w).all()
        assert (pred.bboxes[:, 1::2] <= h).all()
        assert (pred.bboxes >= 0).all()
        assert torch.all(pred.scores[:-1] >= pred.scores[1:])
    # the head's forward is the same in training and inference (six maps
    # per level), the dummy forward FLOPs are counted on
    outs = model.bbox_head(model.extract_feat(img))
    assert len(outs) == 6 and all(len(o) == 5 for o in outs)
    assert outs[3][0].shape[1] == 2 and outs[4][0].shape[1] == 4
    assert outs[5][0].shape[1] == 8


def test_clear_errors_for_bad_head_configs():
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        bad = _model_cfg(corner_refine_levels=(None, 0, 0))
        with pytest.raises(ValueError, match='corner_refine_levels'):
            MODELS.build(bad)
        no_heatmap = _model_cfg()
        no_heatmap.train_cfg.pop('heatmap')
        with pytest.raises(KeyError, match="'heatmap'"):
            MODELS.build(no_heatmap)
        with pytest.raises(ValueError, match='center_init'):
            MODELS.build(_model_cfg(use_grid_points=True))


def test_other_box_transforms_still_work(detector):
    """'exact_minmax' reads the first two points as the corners; mmdet's
    transforms are inherited unchanged."""
    head = detector.bbox_head
    pts = torch.tensor([[1., 2., 5., 7., 3., 3., 0., 9.] + [0.] * 10])
    assert head.points2bbox(pts, y_first=False).tolist() == [[1., 2., 5., 7.]]
    assert head.points2bbox(pts, y_first=True).tolist() == [[2., 1., 7., 5.]]
    head.transform_method = 'minmax'
    try:
        assert head.points2bbox(pts, y_first=False).tolist() == \
            [[0., 0., 5., 9.]]
    finally:
        head.transform_method = 'exact_minmax'
    assert math.isclose(head.gradient_mul, 0.1)


# -------------------------------------------- the Swin authors' Table 2 model
BIFPN = osp.join(REPO, 'configs', 'swin',
                 'reppoints-v2_r50_bifpn_giou-qfl_ms-480-960-3x_coco.py')


def test_legacy_giou_is_giou_with_one_added_to_every_side():
    from mmdet.models.losses import GIoULoss

    from mmvisattn.models.losses import LegacyGIoULoss
    pred = torch.tensor([[0., 0., 2., 2.], [1., 1., 3., 4.]])
    target = torch.tensor([[1., 1., 3., 3.], [1., 1., 3., 4.]])
    legacy = LegacyGIoULoss(reduction='none')(pred, target)
    # box 1, "+1": 3x3 boxes overlapping 2x2, union 14, enclosure 4x4
    assert legacy[0].item() == pytest.approx(1 - (4 / 14 - (16 - 14) / 16))
    assert legacy[1].item() == pytest.approx(0., abs=1e-6)
    # offset 0 is mmdet's GIoU; with +1 the same boxes lose less
    plain = LegacyGIoULoss(offset=0., reduction='none')(pred, target)
    assert torch.allclose(plain, GIoULoss(reduction='none')(pred, target),
                          atol=1e-6)
    assert legacy[0] < plain[0]
    # per-coordinate weights as the point heads pass them; no positive
    weight = torch.zeros(2, 4, requires_grad=True)
    zero = LegacyGIoULoss()(pred, target, weight)
    assert zero.item() == 0. and zero.requires_grad


def test_quality_targets_are_the_refined_boxes_iou():
    head = _bifpn_head()
    labels = torch.tensor([2, 8, 0])  # 8 = background (num_classes)
    pred = torch.tensor([[0., 0., 10., 10.], [0., 0., 5., 5.],
                         [0., 0., 10., 20.]], requires_grad=True)
    gt = torch.tensor([[0., 0., 10., 5.], [0., 0., 5., 5.],
                       [0., 0., 10., 10.]])
    quality = head.refined_box_quality(labels, pred, gt)
    assert quality.tolist() == pytest.approx([0.5, 0., 0.5])
    assert not quality.requires_grad


def _bifpn_head():
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    cfg = Config.fromfile(BIFPN)
    head = copy.deepcopy(cfg.model.bbox_head)
    head.update(num_classes=8, train_cfg=cfg.model.train_cfg,
                test_cfg=cfg.model.test_cfg)
    with DefaultScope.overwrite_default_scope('mmdet'):
        return MODELS.build(head)


def test_bifpn_model_trains_with_quality_focal_loss():
    """The Table 2 model (BiFPN, QFL, legacy GIoU) on ResNet-18: losses
    finite, and the classification loss is QFL on IoU targets (it differs
    from the focal loss of the FPN model on the same outputs)."""
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    cfg = Config.fromfile(BIFPN)
    model = copy.deepcopy(cfg.model)
    model.backbone.update(depth=18, init_cfg=None)
    model.neck.in_channels = [128, 256, 512]
    model.bbox_head.update(num_classes=8)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        detector = MODELS.build(model)
    detector.init_weights()
    assert type(detector.neck).__name__ == 'BiFPN'
    boxes = [[30., 40., 150., 200.], [200., 20., 300., 90.]]
    img = _image_with_boxes(256, 320, boxes)
    losses = detector.train().loss(img, [_sample(256, 320, boxes, [3, 7])])
    total = sum(v if torch.is_tensor(v) else sum(v) for v in losses.values())
    assert torch.isfinite(total)
    total.backward()
    assert detector.neck.layers[0].bottom_up_fusions[0].weight.grad is not None
    # corner pools keep ConvModule's Kaiming init (mmcv: fan_out, std
    # sqrt(2 / (out x kh x kw))), the towers N(0, 0.01), as the authors'
    # init_weights
    head = detector.bbox_head
    conv = head.tl_pool.reduce_convs[0].conv.weight
    assert conv.std().item() == pytest.approx(
        math.sqrt(2 / conv[:, 0].numel()), rel=0.1)
    assert head.cls_convs[0].conv.weight.std().item() == pytest.approx(
        0.01, rel=0.1)


def test_bifpn_shapes_and_errors():
    from mmvisattn.models.necks import BiFPN
    neck = BiFPN([8, 16, 32], out_channels=16, num_outs=5, num_repeat=2)
    feats = [torch.randn(1, c, 40 // s, 56 // s)
             for c, s in zip([8, 16, 32], [1, 2, 4])]
    outs = neck(feats)
    assert [tuple(o.shape[-2:]) for o in outs] == [(40, 56), (20, 28),
                                                    (10, 14), (5, 7), (3, 4)]
    assert all(o.shape[1] == 16 for o in outs)
    with pytest.raises(ValueError, match='expects 3 input levels'):
        neck(feats[:2])
    with pytest.raises(ValueError, match='num_outs=2'):
        BiFPN([8, 16, 32], num_outs=2)


def test_atss_needs_no_v2_padding_at_the_training_scales():
    """The authors' ATSSAssignerV2 differs from mmdet's ATSSAssigner only
    when a level has fewer valid points than topk (it pads with random
    repeats). With the config's resizes (short side 480..960, long side <=
    1333, keep ratio) no image of any aspect ratio gets there: the coarsest
    level (stride 128) keeps at least 11 points."""
    import mmcv
    cfg = Config.fromfile(BIFPN)
    topk = cfg.model.train_cfg.refine.assigner.topk
    scales = cfg.train_dataloader.dataset.pipeline[2].scales
    fewest = math.inf
    for scale in scales:
        for aspect in [1, 1.33, 2, 2.78, 3, 5, 10, 30]:
            for size in [(640, int(640 * aspect)), (int(640 * aspect), 640)]:
                w, h = mmcv.rescale_size(size, scale)
                for stride in cfg.model.bbox_head.point_strides:
                    fewest = min(fewest,
                                 math.ceil(h / stride) * math.ceil(w / stride))
    assert fewest >= 11 > topk == 9, fewest


def test_nms_pre_takes_the_best_locations_then_every_class_above_threshold(
        detector):
    """As the authors: the nms_pre locations with the highest best-class
    score, then every (location, class) pair above score_thr (mmdet's
    filter_scores_and_topk would keep the nms_pre best pairs instead)."""
    from mmengine.config import ConfigDict
    head = detector.bbox_head
    sizes = [(4, 4), (2, 2), (1, 1), (1, 1), (1, 1)]
    cls = [torch.full((1, 8, h, w), -10.) for h, w in sizes]
    logit = torch.logit(torch.tensor(0.5))
    # level 0: location (0, 0) has three classes above 0.5, three more
    # locations one class each, in decreasing score
    cls[0][0, :3, 0, 0] = logit + torch.tensor([5., 4.9, 4.8])
    for k, (y, x) in enumerate([(1, 1), (2, 2), (3, 3)]):
        cls[0][0, 4, y, x] = logit + 3. - k
    zeros = [torch.zeros(1, c, h, w) for c in (18, 18, 2, 4, 8)
             for h, w in sizes]
    maps = [zeros[i * 5:(i + 1) * 5] for i in range(5)]
    cfg = ConfigDict(nms_pre=3, score_thr=0.5, min_bbox_size=-1,
                     nms=dict(type='nms', iou_threshold=0.6),
                     max_per_img=100)
    meta = dict(img_shape=(32, 32), ori_shape=(32, 32),
                scale_factor=(1., 1.), pad_shape=(32, 32))
    result = head.predict_by_feat(cls, *maps, batch_img_metas=[meta],
                                  cfg=cfg, with_nms=False)[0]
    # the three best locations: (0, 0) with its 3 classes, (1, 1), (2, 2)
    assert sorted(result.labels.tolist()) == [0, 1, 2, 4, 4]
    assert (result.scores > 0.5).all()
