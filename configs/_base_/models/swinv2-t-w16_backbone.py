# Swin V2-T as a detection / segmentation backbone (configs/swin_v2): the
# window-16 / 256 ImageNet-1K release, run at window 16 on every stage.
# Pre-training ran stage 4 (8x8 at 256) at window 8, hence the pre-trained
# windows (16, 16, 16, 8): the continuous position bias is evaluated at
# offsets normalised as in pre-training, nothing resized. For configs that
# put it in another model's place:
#     _base_ = ['<that model's config>', '../_base_/models/swinv2-t-w16_backbone.py']
#     model = dict(backbone=dict(_base_.swinv2_t_backbone, _delete_=True))
#     optim_wrapper = dict(paramwise_cfg=_base_.swinv2_paramwise_cfg)
# Only swinv2_t_* / swinv2_* keys here, so it sits beside any other base.
swinv2_t_pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v2.0.0/swinv2_tiny_patch4_window16_256.pth'  # noqa
swinv2_t_backbone = dict(
    type='mmvisattn.SwinTransformerV2',
    arch='tiny',
    img_size=256,
    window_size=16,
    pretrained_window_sizes=(16, 16, 16, 8),
    drop_path_rate=0.2,
    out_indices=(0, 1, 2, 3),
    init_cfg=dict(type='Pretrained', checkpoint=swinv2_t_pretrained))
# The V1 dense recipes' no-decay keys (V2 has no relative position table),
# and the position MLP and logit scales: the authors' V2 code's
# no_weight_decay_keywords.
swinv2_paramwise_cfg = dict(
    _delete_=True,
    custom_keys={
        'absolute_pos_embed': dict(decay_mult=0.),
        'norm': dict(decay_mult=0.),
        'cpb_mlp': dict(decay_mult=0.),
        'logit_scale': dict(decay_mult=0.)
    })
