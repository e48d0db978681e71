# HTC++ Swin-L on COCO test-dev, the Swin paper's headline (abstract and
# Table 2(c)): 58.7 box AP / 51.1 mask AP with multi-scale + flip testing,
# 57.7 / 50.2 single-scale. test-dev has no public annotations: this config
# only writes the predictions in COCO's result format for the evaluation
# server (the COCO detection challenge on codalab):
#   python tools/test.py configs/swin/htc++_swin-l-p4-w7_fpn_instaboost-ms-400-1400_6x_coco-test-dev.py CKPT --tta
# writes work_dirs/htc++_swin-l_test-dev/results.bbox.json and
# results.segm.json; the server wants each renamed
# detections_test-dev2017_<method>_results.json and zipped on its own.
# Data: data/coco/test2017/ and data/coco/annotations/
# image_info_test-dev2017.json.
_base_ = './htc++_swin-l-p4-w7_fpn_instaboost-ms-400-1400_6x_coco.py'

test_dev_ann = 'annotations/image_info_test-dev2017.json'
# no annotations to load
test_pipeline = [
    t for t in _base_.test_pipeline if t['type'] != 'LoadAnnotations'
]
test_dataloader = dict(
    dataset=dict(
        ann_file=test_dev_ann,
        data_prefix=dict(img='test2017/'),
        pipeline=test_pipeline))
test_evaluator = dict(
    ann_file=_base_.data_root + test_dev_ann,
    format_only=True,
    outfile_prefix='./work_dirs/htc++_swin-l_test-dev/results')
