# The RSWAtt source's segmentation decoder (mmvisattn.RSWAttHead: the Swin-T
# pyramid fused at 1/4 to 256 channels, 4 RSWAtt layers with 8 heads, then
# conv-BN-ReLU and the classifier) in place of UperNet's head, on the
# UperNet Swin-T ADE20K recipe (512x512, AdamW 6e-5, poly, 160K iterations,
# batch 16) with its auxiliary FCN head.
_base_ = [
    '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py',
    '../_base_/models/rswatt_decode_head.py',
]

model = dict(decode_head=dict(_base_.rswatt_decode_head, _delete_=True))
