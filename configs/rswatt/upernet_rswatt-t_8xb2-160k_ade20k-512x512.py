# UperNet with the RSWAtt backbone at Swin-T scale (largest windows 5 and 9)
# on the Swin-T ADE20K recipe (512x512, AdamW 6e-5, poly, 160K iterations,
# batch 16). No ImageNet weights exist for it yet (see the Cascade config).
_base_ = '../swin/upernet_swin-t-p4-w7_8xb2-160k_ade20k-512x512.py'  # noqa

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.RSWAttTransformer',
        arch='tiny',
        scale_windows=(5, 9),
        drop_path_rate=0.3,
        out_indices=(0, 1, 2, 3),
        init_cfg=None))
