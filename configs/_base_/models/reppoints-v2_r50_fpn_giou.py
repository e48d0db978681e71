# RepPoints v2 (Chen et al., NeurIPS 2020) with ResNet-50 and FPN (P3-P7,
# GN), as the authors' reppoints_v2_r50_fpn_giou config: GIoU point losses,
# 'exact_minmax' box transform (first two points = the box corners), corner
# verification (corner pools of 64 channels, Gaussian focal loss 0.25,
# offsets smooth-L1 1.0), foreground verification (focal loss 0.1), point
# assigner for the init stage, ATSS (top 9) for the refine stage, NMS 0.6.
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

norm_cfg = dict(type='GN', num_groups=32, requires_grad=True)
model = dict(
    type='mmvisattn.RepPointsV2Detector',
    data_preprocessor=dict(
        type='DetDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_size_divisor=32),
    backbone=dict(
        type='ResNet',
        depth=50,
        num_stages=4,
        out_indices=(0, 1, 2, 3),
        frozen_stages=1,
        norm_cfg=dict(type='BN', requires_grad=True),
        norm_eval=True,
        style='pytorch',
        init_cfg=dict(type='Pretrained', checkpoint='torchvision://resnet50')),
    neck=dict(
        type='FPN',
        in_channels=[256, 512, 1024, 2048],
        out_channels=256,
        start_level=1,
        add_extra_convs='on_input',
        num_outs=5,
        norm_cfg=norm_cfg),
    bbox_head=dict(
        type='mmvisattn.RepPointsV2Head',
        num_classes=80,
        in_channels=256,
        feat_channels=256,
        point_feat_channels=256,
        stacked_convs=3,
        shared_stacked_convs=1,
        corner_channels=64,
        corner_first_kernel=3,
        corner_kernel=1,
        num_points=9,
        gradient_mul=0.1,
        point_strides=[8, 16, 32, 64, 128],
        point_base_scale=4,
        corner_refine_levels=(None, 0, 0, 1, 1),
        norm_cfg=norm_cfg,
        loss_cls=dict(
            type='FocalLoss',
            use_sigmoid=True,
            gamma=2.0,
            alpha=0.25,
            loss_weight=1.0),
        loss_bbox_init=dict(type='GIoULoss', loss_weight=1.0),
        loss_bbox_refine=dict(type='GIoULoss', loss_weight=2.0),
        loss_heatmap=dict(
            type='GaussianFocalLoss', alpha=2.0, gamma=4.0, loss_weight=0.25),
        loss_offset=dict(type='SmoothL1Loss', beta=1.0 / 9.0, loss_weight=1.0),
        loss_fg=dict(
            type='mmvisattn.SeparateFocalLoss',
            gamma=2.0,
            alpha=0.25,
            loss_weight=0.1),
        transform_method='exact_minmax'),
    train_cfg=dict(
        init=dict(
            assigner=dict(type='PointAssigner', scale=4, pos_num=1),
            allowed_border=-1,
            pos_weight=-1,
            debug=False),
        heatmap=dict(
            assigner=dict(
                type='mmvisattn.CornerTargetAssigner',
                gaussian_bump=True,
                gaussian_iou=0.7)),
        refine=dict(
            assigner=dict(type='ATSSAssigner', topk=9),
            allowed_border=-1,
            pos_weight=-1,
            debug=False)),
    test_cfg=dict(
        nms_pre=1000,
        min_bbox_size=0,
        score_thr=0.05,
        nms=dict(type='nms', iou_threshold=0.6),
        max_per_img=100))
