# Swin-T as a detection / segmentation backbone, as the official configs set
# it up (window 7, qkv bias, drop path 0.2, all four stages out, the
# ImageNet-1K weights), for configs that put it in another model's place:
#     _base_ = ['<that model's config>', '../_base_/models/swin-t_backbone.py']
#     model = dict(backbone=dict(_base_.swin_t_backbone, _delete_=True),
#                  neck=dict(in_channels=_base_.swin_t_channels))
# Only swin_t_* keys here, so it sits beside any other base.
swin_t_pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'  # noqa
swin_t_channels = [96, 192, 384, 768]
swin_t_backbone = dict(
    type='mmvisattn.SwinTransformer',
    arch='tiny',
    window_size=7,
    mlp_ratio=4,
    qkv_bias=True,
    drop_rate=0.,
    attn_drop_rate=0.,
    drop_path_rate=0.2,
    patch_norm=True,
    out_indices=(0, 1, 2, 3),
    with_cp=False,
    init_cfg=dict(type='Pretrained', checkpoint=swin_t_pretrained))
