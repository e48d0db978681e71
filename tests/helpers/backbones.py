"""The backbone configurations that the mode and precision tests walk
through: every Swin attention/shift variant with its own code path, the
HTC++ global block, Swin V2, RSWAtt, and (for autocast) Performer and the TNT
pyramid."""


BACKBONES = {
    'swin-cyclic': dict(type='SwinTransformer', arch='tiny'),
    'swin-padding': dict(type='SwinTransformer', arch='tiny', attn_cfg=dict(
        type='WindowAttention', shift_mode='padding')),
    'swin-sliding': dict(type='SwinTransformer', arch='tiny',
                         attn_cfg=dict(type='HaloSlidingWindowAttention')),
    'swin-sliding-naive': dict(type='SwinTransformer', arch='tiny',
                               attn_cfg=dict(type='SlidingWindowAttention')),
    'swin-global-block': dict(type='SwinTransformer', arch='tiny',
                              extra_global_block=True),
    'swinv2': dict(type='SwinTransformerV2', arch='tiny'),
    'rswatt': dict(type='RSWAttTransformer', arch='tiny'),
}


# Mixed precision. CUDA autocast runs LayerNorm in fp32 while the linears
# run in half precision, so the residual stream (fp32) meets half-precision
# attention outputs; CPU autocast keeps LayerNorm in the autocast dtype and
# hides that. The hooks below make CPU autocast produce fp32 LayerNorm
# outputs, as CUDA's does, so the mixed-dtype residual is exercised here.
AUTOCAST_BACKBONES = {
    **BACKBONES,
    'swin-performer': dict(type='SwinTransformer', arch='tiny',
                           use_abs_pos_embed=True,
                           attn_cfg=dict(type='PerformerAttention')),
    'tnt-pyramid': dict(type='TNT', arch='small', out_type='pyramid',
                        img_size=128),
}
