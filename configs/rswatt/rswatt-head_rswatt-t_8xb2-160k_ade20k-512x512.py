# The RSWAtt source's segmentation decoder (mmvisattn.RSWAttHead) on the
# RSWAtt-T backbone: upernet_rswatt-t (the UperNet Swin-T ADE20K recipe with
# the RSWAtt-T backbone) with that decoder in place of UperNet's head.
_base_ = [
    './upernet_rswatt-t_8xb2-160k_ade20k-512x512.py',
    '../_base_/models/rswatt_decode_head.py',
]

model = dict(decode_head=dict(_base_.rswatt_decode_head, _delete_=True))
