# The RSWAtt source's detection head with RSWAtt enhancement as mmdet's
# RetinaNet (anchor head, 9 anchors per position: 3 scales x 3 ratios):
# mmdet's RetinaNet R-50 FPN 1x COCO recipe (SGD 0.01, batch 16, 12 epochs)
# with mmvisattn.RSWAttNeck after the FPN, one RSWAtt enhancer per level
# (P3-P7, largest windows 5 and 9, 8 heads on the 256 channels), each
# added as x + gamma * RSWAtt(LN(x)) with gamma starting at zero.
_base_ = 'mmdet::retinanet/retinanet_r50_fpn_1x_coco.py'
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(neck=[
    dict(
        type='FPN',
        in_channels=[256, 512, 1024, 2048],
        out_channels=256,
        start_level=1,
        add_extra_convs='on_input',
        num_outs=5),
    dict(
        type='mmvisattn.RSWAttNeck',
        in_channels=256,
        num_levels=5,
        num_heads=8,
        scale_windows=(5, 9)),
])
