# COCO instances + COCO-stuff maps with HTC++'s training augmentation (Swin
# paper, appendix A2.2): InstaBoost, then "stronger multi-scale training"
# (short side uniformly in 400..1400, long side <= 1600: mmdet's own HTC
# recipe in `htc/htc_x101-64x4d-dconv-c3-c5_fpn_ms-400-1400-16xb1-20e_coco.py`)
# and horizontal flip.
#
# The semantic branch reads `stuffthingmaps/train2017/*.png` (COCO-stuff,
# http://calvin.inf.ed.ac.uk/wp-content/uploads/data/cocostuffdataset/stuffthingmaps_trainval2017.zip)
# next to `train2017/`. InstaBoost needs `pip install instaboostfast`
# (requirements/htcpp.txt); `mmvisattn.InstaBoost` is mmdet's transform with
# instaboostfast's numpy>=1.24 bug worked around (mmvisattn/datasets). It moves instances in the image before the
# annotations are loaded, so the stuff map is not moved with them (mmdet's
# transform, as in mmdet 2.x that the paper used).
_base_ = 'mmdet::_base_/datasets/coco_instance.py'

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    # mmdet's InstaBoost settings (configs/instaboost), applied to half of
    # the images
    dict(
        type='mmvisattn.InstaBoost',
        action_candidate=('normal', 'horizontal', 'skip'),
        action_prob=(1, 0, 0),
        scale=(0.8, 1.2),
        dx=15,
        dy=15,
        theta=(-1, 1),
        color_prob=0.5,
        hflag=False,
        aug_ratio=0.5),
    dict(
        type='LoadAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    # short side drawn from 400..1400, long side 1600, keep ratio: the
    # scale is min(1600 / long, short / short)
    dict(
        type='RandomResize',
        scale=[(1600, 400), (1600, 1400)],
        keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
# 1 image per GPU x 16 GPUs = batch 16, as mmdet's 400..1400 HTC recipe (at
# short side 1400 a second image rarely fits).
train_dataloader = dict(
    batch_size=1,
    dataset=dict(
        data_prefix=dict(img='train2017/', seg='stuffthingmaps/train2017/'),
        pipeline=train_pipeline))
