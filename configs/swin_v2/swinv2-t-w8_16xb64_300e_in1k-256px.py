# Swin V2-T on ImageNet-1K from scratch, 256px, window 8: the authors'
# recipe (microsoft/Swin-Transformer configs/swinv2/
# swinv2_tiny_patch4_window8_256.yaml with config.py's defaults: 300 epochs,
# AdamW lr 5e-4 per 512 images (1e-3 at batch 1024), weight decay 0.05,
# cosine with 20 warm-up epochs, gradient clipping 5, RandAugment, Mixup 0.8,
# CutMix 1.0, random erasing 0.25, label smoothing 0.1, drop path 0.2; the
# release: 81.8 top-1, 28M, 5.9G). mmpretrain's swinv2-tiny-w8 config is
# that recipe (16 GPUs x 64); the backbone is ours, and the position MLP and
# logit scales take no weight decay, as the authors' no_weight_decay_keywords.
_base_ = 'mmpretrain::swin_transformer_v2/swinv2-tiny-w8_16xb64_in1k-256px.py'
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.SwinTransformerV2',
        arch='tiny',
        img_size=256,
        window_size=8,
        out_indices=(3, ),  # the classifier pools the last stage
        pad_small_map=False,  # the authors' classifier semantics
        drop_path_rate=0.2))
# mmpretrain's swin rule (no decay on norms, biases, 1-D parameters and the
# absolute embedding), with the authors' V2 no_weight_decay_keywords in
# place of the V1 relative table
optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.absolute_pos_embed': dict(decay_mult=0.0),
            '.cpb_mlp': dict(decay_mult=0.0),
            '.logit_scale': dict(decay_mult=0.0)
        }))

# Released classifiers (the authors' {'model': ...}, timm's, Hugging Face's
# pytorch_model.bin) load as whole models through load_from / tools/test.py
# (docs/checkpoints.md).
custom_hooks = [dict(type='mmvisattn.ReleaseClassifierHook')]
