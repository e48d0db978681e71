"""The demo Cascade Mask R-CNN (configs/demo/cascade-mask-rcnn_swin-t_shapes.py)
narrowed for tests about the tools' wiring (train, resume, test, several
processes): the demo's data, pipeline, heads, losses, optimizer and hooks,
with a one-block-per-stage Swin of width 32 and 64-channel neck and heads,
so that a checkpoint with its optimizer state is a few MB, not ~1 GB."""
import os.path as osp

from helpers import REPO

DEMO_CONFIG = osp.join(REPO, 'configs', 'demo',
                       'cascade-mask-rcnn_swin-t_shapes.py')


def small_det_config(folder, name='small_cascade.py'):
    path = osp.join(str(folder), name)
    with open(path, 'w') as f:
        f.write(f'''\
_base_ = {DEMO_CONFIG!r}
_width = 64
model = dict(
    backbone=dict(embed_dims=32, depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8)),
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=_width),
    rpn_head=dict(in_channels=_width, feat_channels=_width),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=_width),
        mask_roi_extractor=dict(out_channels=_width),
        bbox_head=[
            dict(head, in_channels=_width, conv_out_channels=_width,
                 fc_out_channels=128)
            for head in _base_.model.roi_head.bbox_head
        ],
        mask_head=dict(in_channels=_width, conv_out_channels=_width)))
''')
    return path
