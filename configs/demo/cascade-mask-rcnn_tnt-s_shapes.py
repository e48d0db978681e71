# The demo with TNT-S instead of Swin-T: Cascade Mask R-CNN from scratch on
# the generated shapes (same data, schedule and heads as
# cascade-mask-rcnn_swin-t_shapes.py), TNT's simple feature pyramid. Compare
# the pyramids with --cfg-options model.backbone.pyramid=depths.
_base_ = './cascade-mask-rcnn_swin-t_shapes.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.TNT',
        arch='small',
        drop_path_rate=0.1,
        pyramid='simple',
        out_indices=(0, 1, 2, 3)),
    neck=dict(in_channels=[96, 192, 384, 384]))
# TNT's weight-decay rule, as configs/tnt/ (no decay on norm layers,
# position embeddings and the class token); from scratch, so no layer-wise
# lr decay (rate 1).
optim_wrapper = dict(
    constructor='mmvisattn.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        _delete_=True,
        num_layers=12,
        layer_decay_rate=1.0,
        no_decay_names=('sentence_pos', 'word_pos', 'cls_token')))
