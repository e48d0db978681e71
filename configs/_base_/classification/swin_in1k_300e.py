# The Swin paper's ImageNet-1K recipe (section 4.1, "Regular ImageNet-1K
# training"): 300 epochs, AdamW lr 1e-3 at batch 1024, weight decay 0.05,
# cosine decay with 20 warm-up epochs, gradient clipping 5, the DeiT
# augmentation and regularisation (RandAugment, Mixup 0.8, CutMix 1.0,
# random erasing 0.25, label smoothing 0.1), no repeated augmentation, no EMA.
# mmpretrain's swin-tiny config is exactly that recipe (16 GPUs x 64); only
# the backbone is ours. Stochastic depth is set per model (T/S/B 0.2/0.3/0.5).
_base_ = 'mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py'
custom_imports = dict(imports=['mmvisattn'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmvisattn.SwinTransformer',
        arch='tiny',
        out_indices=(3, ),  # the classifier pools the last stage
        # the official classifiers' semantics: a stage whose map is one
        # window (7x7 at 224, 12x12 at 384 with window 12) is not shifted
        pad_small_map=False,
        drop_path_rate=0.2))
# data/imagenet/{train,val}/ with meta/{train,val}.txt (mmpretrain's layout),
# or class folders without meta/ (mmpretrain's ImageNet then scans them).

# Released classifiers (official Swin {'model': ...}, TNT, timm) load as
# whole models through load_from / tools/test.py (docs/checkpoints.md).
custom_hooks = [dict(type='mmvisattn.ReleaseClassifierHook')]
