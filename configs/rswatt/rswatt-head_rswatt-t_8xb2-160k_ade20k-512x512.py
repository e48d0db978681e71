# The RSWAtt source's segmentation decoder (mmvisattn.RSWAttHead) on the
# RSWAtt-T backbone: rswatt-head_swin-t-p4-w7 (the UperNet Swin-T ADE20K
# recipe with that decoder) with upernet_rswatt-t's backbone.
_base_ = './rswatt-head_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.RSWAttTransformer',
        arch='tiny',
        window_sizes=(5, 9),
        drop_path_rate=0.3,
        out_indices=(0, 1, 2, 3),
        init_cfg=None))
