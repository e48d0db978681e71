# HTC++ Swin-B without HTC's semantic branch: for data without COCO-stuff
# maps (`stuffthingmaps/`). Not the paper's model (it has the branch, see the
# header of the Swin-B config): 2.8M fewer parameters, ~45G fewer FLOPs at
# 1280x800, and no semantic features fused into the box and mask RoIs.
_base_ = './htc++_swin-b-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py'

model = dict(
    data_preprocessor=dict(pad_seg=False),
    roi_head=dict(semantic_roi_extractor=None, semantic_head=None))

train_pipeline = [
    dict(step, with_seg=False) if step['type'] == 'LoadAnnotations' else step
    for step in _base_.train_pipeline
]
train_dataloader = dict(
    dataset=dict(
        data_prefix=dict(_delete_=True, img='train2017/'),
        pipeline=train_pipeline))
