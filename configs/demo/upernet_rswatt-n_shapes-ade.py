# UperNet with the small RSWAtt backbone (arch='nano', largest windows 5 and
# 9) on the ADE20K-layout copy of the generated shapes: the short run behind
# the README's plot of learned window extents
# (dev/rswatt_extents.py). Data, schedule and heads as
# upernet_swin-t_shapes-ade.py.
_base_ = './upernet_swin-t_shapes-ade.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.RSWAttTransformer',
        arch='nano',
        scale_windows=(5, 9),
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3)),
    decode_head=dict(in_channels=[64, 128, 256, 512]),
    auxiliary_head=dict(in_channels=256))
