"""tools/analysis_tools/analyze_logs.py, browse_dataset.py and
demo/image_demo.py, on the project's generated shapes."""
import glob
import json
import os
import os.path as osp
import re

import mmcv
import numpy as np
import pytest
import torch

from helpers import REPO, default_scope_guard, generate_shapes, load_tool

DET_CONFIG = osp.join(REPO, 'configs', 'demo',
                      'cascade-mask-rcnn_swin-t_shapes.py')
SEG_CONFIG = osp.join(REPO, 'configs', 'demo', 'upernet_swin-t_shapes-ade.py')
SIZE = 64

analyze_logs = load_tool('tools/analysis_tools/analyze_logs.py')


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('shapes'))
    return generate_shapes(root, num_train=8, num_val=2, size=(SIZE, SIZE))


@pytest.fixture(scope='module')
def seg_run(seg_demo_run):
    """The work dir of tests/conftest.py's seg_demo_run: a real 2-iteration
    demo UperNet run, then tools/test.py on its checkpoint."""
    return seg_demo_run['work']


# Lines in the exact formats mmengine 0.10 writes (from real runs).
_TRAIN = ('2026/11/29 19:16:57 - mmengine - INFO - {head}  base_lr: '
          '1.2690e-04 lr: 1.2690e-04  eta: 0:07:37  time: {time:.4f}  '
          'data_time: 0.0084  grad_norm: 11.3780  loss: {loss:.4f}  '
          'loss_rpn_cls: {rpn:.4f}  s0.loss_cls: 0.8655  s0.acc: 82.8125')
_PROGRESS = ('2026/11/29 19:25:20 - mmengine - INFO - {head}    eta: '
             '0:00:18  time: 0.6140  data_time: 0.0018  ')
_RESULT = ('2026/11/29 19:25:39 - mmengine - INFO - {head}    '
           'coco/bbox_mAP: {map:.4f}  coco/bbox_mAP_50: 0.9970  mIoU: '
           '{miou:.4f}  data_time: 0.0015  time: 0.6259')


def _write_run(run_dir, by_epoch):
    """One run as mmengine writes it: text log and vis_data/scalars.json.
    Iteration-based: 4 logged iterations of 10, evaluation at 20 and 40;
    epoch-based: 2 epochs of 20 iterations, logged every 10."""
    name = osp.basename(run_dir)
    text, lines = [], []
    for i in (10, 20, 30, 40):
        epoch, inner = (i - 1) // 20 + 1, (i - 1) % 20 + 1
        head = (f'Epoch(train)  [{epoch}][{inner:2d}/20]'
                if by_epoch else f'Iter(train) [{i:2d}/40]')
        values = dict(time=2 + i / 1000, loss=4 / i + 1e-5, rpn=1 / i)
        text.append(_TRAIN.format(head=head, **values))
        line = dict(base_lr=1.269e-4, lr=1.269e-4, data_time=0.0084,
                    loss=values['loss'], loss_rpn_cls=values['rpn'],
                    time=values['time'], iter=i, step=i)
        lines.append(dict(line, epoch=epoch) if by_epoch else line)
        if i % 20 == 0:
            epoch = i // 20
            head = f'Epoch(val) [{epoch}]' if by_epoch else 'Iter(val) '
            text.append(_PROGRESS.format(head=head + '[1/2]'))
            metrics = dict(map=i / 100, miou=i / 2)
            text.append(_RESULT.format(head=head + '[2/2]', **metrics))
            lines.append({'coco/bbox_mAP': metrics['map'],
                          'coco/bbox_mAP_50': 0.997, 'mIoU': metrics['miou'],
                          'data_time': 0.0015, 'time': 0.6259,
                          'step': epoch if by_epoch else i})
    (run_dir / 'vis_data').mkdir(parents=True)
    (run_dir / f'{name}.log').write_text('\n'.join(text) + '\n')
    (run_dir / 'vis_data' / 'scalars.json').write_text(
        ''.join(json.dumps(line) + '\n' for line in lines))
    return str(run_dir / f'{name}.log'), str(run_dir)


@pytest.mark.parametrize('by_epoch', [False, True])
def test_text_log_and_scalars_json_agree(tmp_path, by_epoch):
    text_log, run_dir = _write_run(tmp_path / '20261129_191629', by_epoch)
    from_json = analyze_logs.load_log(run_dir)
    from_text = analyze_logs.load_log(text_log)
    assert analyze_logs.log_files(run_dir)[0].endswith('scalars.json')
    for curves in (from_json, from_text):
        steps, values = curves['loss']
        assert steps == [10, 20, 30, 40]
        assert values == pytest.approx([4 / i + 1e-5 for i in steps],
                                       abs=5e-5)
        assert curves.metrics == {'coco/bbox_mAP', 'coco/bbox_mAP_50', 'mIoU'}
        # results at the iteration they were evaluated at, also where
        # epoch-based runs log the epoch as their step
        assert curves['mIoU'] == ([20, 40], [10.0, 20.0])
        assert curves['coco/bbox_mAP'] == ([20, 40], [0.2, 0.4])
        assert 'eta' not in curves and 'step' not in curves
    assert from_json['loss'][1] == [4 / i + 1e-5 for i in (10, 20, 30, 40)]
    assert from_text['loss'][1] == [round(4 / i + 1e-5, 4)
                                    for i in (10, 20, 30, 40)]


def test_work_dir_merges_runs_in_order(tmp_path):
    """A run, its resumption (replacing iterations 30 and 40), then a
    tools/test.py run: its result lands at the last training iteration."""
    work = tmp_path / 'work'
    _write_run(work / '20261129_100000', by_epoch=False)
    resumed = work / '20261129_110000' / 'vis_data'
    resumed.mkdir(parents=True)
    resumed.joinpath('scalars.json').write_text(''.join(
        json.dumps(dict(loss=0.5, time=2.0, iter=i, step=i)) + '\n'
        for i in (30, 40, 50)))
    test_run = work / '20261129_120000'
    test_run.mkdir()
    test_run.joinpath('20261129_120000.json').write_text(
        json.dumps({'mIoU': 33.0, 'data_time': 0.01, 'time': 0.1}) + '\n')
    (work / 'iter_50.pth').write_bytes(b'')
    curves = analyze_logs.load_log(str(work))
    assert curves['loss'][0] == [10, 20, 30, 40, 50]
    assert curves['loss'][1] == pytest.approx([0.40001, 0.20001, 0.5, 0.5,
                                               0.5])
    assert curves['mIoU'] == ([20, 40, 50], [10.0, 20.0, 33.0])


def test_plot_curve_png(tmp_path):
    _, run_a = _write_run(tmp_path / 'a' / '20261129_191629', by_epoch=False)
    text_b, _ = _write_run(tmp_path / 'b' / '20261129_191630', by_epoch=True)
    out = str(tmp_path / 'curves.png')
    analyze_logs.main([
        'plot_curve', str(tmp_path / 'a'), text_b, '--keys', 'loss',
        'loss_rpn_cls', 'coco/bbox_mAP', '--out', out, '--title', 'demo',
        '--dpi', '50'
    ])
    # two subplots (losses, metrics): 8 x 7.2 inches at 50 dpi
    assert mmcv.imread(out).shape == (360, 400, 3)
    out_loss = str(tmp_path / 'loss.png')
    analyze_logs.main(['plot_curve', run_a, '--out', out_loss, '--dpi', '50'])
    assert mmcv.imread(out_loss).shape == (180, 400, 3)


def test_cal_train_time(tmp_path, capsys):
    _, run_dir = _write_run(tmp_path / '20261129_191629', by_epoch=False)
    times = analyze_logs.train_time(analyze_logs.load_log(run_dir))
    assert times['mean'] == pytest.approx(2.03)  # the first one left out
    assert times['slowest'] == (40, pytest.approx(2.04))
    analyze_logs.main(['cal_train_time', run_dir])
    assert 'average: 2.0300 s/iter' in capsys.readouterr().out


def test_analyze_logs_errors(tmp_path):
    _, run_dir = _write_run(tmp_path / '20261129_191629', by_epoch=False)
    out = str(tmp_path / 'x.png')
    with pytest.raises(SystemExit, match=r"'s0\.loss_mask' is not in the "
                       r'log .*20261129_191629; available keys: .*loss'):
        analyze_logs.main(['plot_curve', run_dir, '--keys', 'loss',
                           's0.loss_mask', '--out', out])
    missing = str(tmp_path / 'no_such_work_dir')
    with pytest.raises(SystemExit, match=re.escape(missing)):
        analyze_logs.main(['plot_curve', missing, '--out', out])
    (tmp_path / 'empty').mkdir()
    with pytest.raises(FileNotFoundError, match='empty: no mmengine log'):
        analyze_logs.load_log(str(tmp_path / 'empty'))
    assert not osp.exists(out)


@pytest.mark.slow
def test_analyze_logs_on_a_real_run(seg_run, tmp_path):
    (train_dir, test_dir) = sorted(
        glob.glob(osp.join(seg_run, '2*')))
    with open(osp.join(train_dir, 'vis_data', 'scalars.json')) as f:
        logged = [json.loads(line) for line in f]
    curves = analyze_logs.load_log(seg_run)
    assert curves['loss'] == ([1, 2], [line['loss'] for line in logged])
    assert curves['decode.loss_ce'][1] == [line['decode.loss_ce']
                                           for line in logged]
    # the test run's mIoU at the iteration of the checkpoint it evaluated
    with open(osp.join(test_dir, osp.basename(test_dir) + '.json')) as f:
        assert curves['mIoU'] == ([2], [json.load(f)['mIoU']])

    text_log = osp.join(train_dir, osp.basename(train_dir) + '.log')
    with open(text_log) as f:
        printed = [float(v) for v in re.findall(r'  loss: ([\d.]+)', f.read())]
    assert analyze_logs.load_log(text_log)['loss'] == ([1, 2], printed)

    out = str(tmp_path / 'loss.png')
    analyze_logs.main(['plot_curve', seg_run, '--keys', 'loss', 'mIoU',
                       '--out', out])
    assert osp.getsize(out) > 1000


def _resized_raw(path, shape):
    return mmcv.imresize(mmcv.imread(path), shape[1::-1])


def test_browse_detection_dataset(shapes, tmp_path):
    browse = load_tool('tools/analysis_tools/browse_dataset.py')
    out_dir = str(tmp_path / 'train')
    browse.main([DET_CONFIG, '--output-dir', out_dir, '--num', '3',
                 '--cfg-options', f'train_dataloader.dataset.data_root='
                 f'{shapes}/'])
    assert sorted(os.listdir(out_dir)) == [
        f'train_{i:05d}.png' for i in range(3)]

    # test pipeline (no flips): boxes and masks drawn where the objects are;
    # its annotations stay at the original scale and are drawn rescaled
    out_dir = str(tmp_path / 'test')
    browse.main([DET_CONFIG, '--output-dir', out_dir, '--phase', 'test',
                 '--cfg-options', f'test_dataloader.dataset.data_root='
                 f'{shapes}/'])
    with open(osp.join(shapes, 'annotations', 'instances_val.json')) as f:
        coco = json.load(f)
    for image in coco['images']:
        drawn = mmcv.imread(osp.join(out_dir, image['file_name']))
        assert drawn.shape == (160, 160, 3)  # the pipeline's Resize
        raw = _resized_raw(
            osp.join(shapes, 'images', 'val', image['file_name']),
            drawn.shape)
        diff = np.abs(drawn.astype(int) - raw).sum(2)
        # each box's outline (3 px wide) and what it encloses (mask, label)
        edges, boxes = np.zeros(diff.shape, bool), np.zeros(diff.shape, bool)
        scale = drawn.shape[0] / SIZE
        for ann in coco['annotations']:
            if ann['image_id'] == image['id']:
                x, y, w, h = (v * scale for v in ann['bbox'])
                x0, y0, x1, y1 = round(x), round(y), round(x + w), round(y + h)
                edges[y0 - 1:y1 + 2, x0 - 1:x1 + 2] = True
                boxes[y0 + 2:y1 - 1, x0 + 2:x1 - 1] = True
        edges &= ~boxes
        assert diff[edges].mean() > 150, diff[edges].mean()
        assert diff[boxes].mean() > 60, diff[boxes].mean()
        assert diff[~(edges | boxes)].mean() < 10


def test_browse_segmentation_dataset(shapes, tmp_path):
    browse = load_tool('tools/analysis_tools/browse_dataset.py')
    out_dir = str(tmp_path / 'train')
    browse.main([SEG_CONFIG, '--output-dir', out_dir, '--num', '2',
                 '--cfg-options', f'train_dataloader.dataset.data_root='
                 f'{shapes}/ade/'])
    assert len(os.listdir(out_dir)) == 2

    # a palette unlike the shapes' colours, to see the map drawn
    out_dir = str(tmp_path / 'test')
    browse.main([
        SEG_CONFIG, '--output-dir', out_dir, '--phase', 'test',
        '--cfg-options', f'test_dataloader.dataset.data_root={shapes}/ade/',
        'test_dataloader.dataset.metainfo.palette=[[255,0,255],[255,0,255],'
        '[255,0,255]]'
    ])
    for name in ('val_00000.png', 'val_00001.png'):
        drawn = mmcv.imread(osp.join(out_dir, name)).astype(int)
        label = mmcv.imread(
            osp.join(shapes, 'ade', 'annotations', 'validation', name),
            'unchanged')
        assert drawn.shape[:2] == label.shape == (SIZE, SIZE)
        magenta = (drawn[..., 0] > 150) & (drawn[..., 2] > 150) & \
            (drawn[..., 1] < 100)
        shapes_px = label > 0  # void (0) is left undrawn
        # the rest of a shape is under its class name
        assert magenta[shapes_px].mean() > 0.6, magenta[shapes_px].mean()
        assert magenta[~shapes_px].mean() < 0.02, magenta[~shapes_px].mean()


@pytest.mark.slow
def test_image_demo_segmentation(seg_run, shapes, tmp_path):
    demo = load_tool('demo/image_demo.py')
    img = osp.join(shapes, 'ade', 'images', 'validation', 'val_00000.png')
    out = str(tmp_path / 'out' / 'seg.png')
    demo.main([img, SEG_CONFIG, osp.join(seg_run, 'iter_2.pth'),
               '--out-file', out, '--device', 'cpu'])
    drawn, raw = mmcv.imread(out), mmcv.imread(img)
    assert drawn.shape == raw.shape
    assert np.abs(drawn.astype(int) - raw).mean() > 5


@pytest.fixture(scope='module')
def det_checkpoint(tmp_path_factory):
    """The demo detector's own random initialisation, saved as training
    saves it (with the classes in its meta)."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    with default_scope_guard():
        register_all_modules()
        cfg = Config.fromfile(DET_CONFIG)
        torch.manual_seed(0)
        model = MODELS.build(cfg.model)
    path = str(tmp_path_factory.mktemp('det') / 'random.pth')
    torch.save(dict(state_dict=model.state_dict(),
                    meta=dict(dataset_meta=dict(cfg.metainfo))), path)
    return path


def test_image_demo_detection(det_checkpoint, shapes, tmp_path):
    demo = load_tool('demo/image_demo.py')
    img = osp.join(shapes, 'images', 'val', 'val_00001.png')
    out = str(tmp_path / 'det.png')
    result = demo.run(demo.parse_args([
        img, DET_CONFIG, det_checkpoint, '--out-file', out, '--device',
        'cpu', '--score-thr', '0'
    ]))
    assert len(result.pred_instances) > 0
    assert result.pred_instances.masks.shape[1:] == (SIZE, SIZE)
    drawn, raw = mmcv.imread(out), mmcv.imread(img)
    assert drawn.shape == raw.shape
    assert np.abs(drawn.astype(int) - raw).mean() > 5


def test_image_demo_errors(shapes, tmp_path):
    demo = load_tool('demo/image_demo.py')
    img = osp.join(shapes, 'images', 'val', 'val_00000.png')
    out = str(tmp_path / 'x.png')
    missing_img = str(tmp_path / 'no_image.png')
    with pytest.raises(SystemExit, match=f'no image at {missing_img}'):
        demo.main([missing_img, SEG_CONFIG, 'x.pth', '--out-file', out])
    missing_ckpt = str(tmp_path / 'no_weights.pth')
    with pytest.raises(SystemExit, match=re.escape(missing_ckpt)):
        demo.main([img, SEG_CONFIG, missing_ckpt, '--out-file', out])
    assert not osp.exists(out)


def _onnx_difference(output):
    """The tool's last line: 'max |onnxruntime - PyTorch|: 1.2e-06 (...)'."""
    found = re.findall(r'max \|onnxruntime - PyTorch\|: ([\d.e+-]+)', output)
    assert found, output[-2000:]
    return float(found[-1])


@pytest.mark.slow
def test_pytorch2onnx_exports_the_demo_segmentor(seg_run, shapes, tmp_path,
                                                 capsys):
    """tools/deployment/pytorch2onnx.py on the trained demo UperNet (its
    pyramid pooling exported at the fixed size), compared with PyTorch on a
    shapes image under onnxruntime."""
    pytest.importorskip('onnxruntime', reason='requirements/deploy.txt')
    tool = load_tool('tools/deployment/pytorch2onnx.py')
    img = osp.join(shapes, 'ade', 'images', 'validation', 'val_00000.png')
    out = str(tmp_path / 'upernet.onnx')
    status = tool.main([SEG_CONFIG, osp.join(seg_run, 'iter_2.pth'),
                        '--shape', str(SIZE), str(SIZE), '--image', img,
                        '--out', out, '--atol', '1e-4'])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'output  0 (1, 3, 16, 16)' in printed  # logits at 1/4 of 64 px
    assert _onnx_difference(printed) <= 1e-4
    assert osp.getsize(out) > 1e6


@pytest.mark.slow
def test_pytorch2onnx_exports_the_demo_detector(det_checkpoint, shapes,
                                                tmp_path, capsys):
    """The demo Cascade Mask R-CNN Swin-T in two graphs (features + RPN,
    RoI heads for the RPN's proposals), each compared with PyTorch on a
    shapes image; mmcv's RoIAlign and mmdet's box decoding exported through
    the tool's replacements (tests/test_deployment.py)."""
    pytest.importorskip('onnxruntime', reason='requirements/deploy.txt')
    tool = load_tool('tools/deployment/pytorch2onnx.py')
    img = osp.join(shapes, 'images', 'val', 'val_00001.png')
    out = str(tmp_path / 'cascade.onnx')
    status = tool.main([DET_CONFIG, det_checkpoint, '--shape', str(SIZE),
                        str(SIZE), '--image', img, '--out', out,
                        '--atol', '1e-4'])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'features and RPN: max' in printed and 'RoI heads: max' in printed
    # 3 classes: 4 box deltas per class from the last stage, the merged
    # masks of the 100 padded proposals
    assert '(100, 12)' in printed and '(100, 3, 28, 28)' in printed
    assert _onnx_difference(printed) <= 1e-4
    assert osp.isfile(tmp_path / 'cascade_roi.onnx')


def test_mmdet_inferencer_runs_our_config(det_checkpoint, shapes):
    """mmdet's own DetInferencer builds the demo config (our backbone,
    registered under mmvisattn) from its path and predicts; the whole
    mmengine checkpoint is read inside ``mmvisattn.runtime()``."""
    from mmdet.apis import DetInferencer

    import mmvisattn
    img = osp.join(shapes, 'images', 'val', 'val_00001.png')
    with default_scope_guard(), mmvisattn.runtime():
        inferencer = DetInferencer(model=DET_CONFIG, weights=det_checkpoint,
                                   device='cpu', show_progress=False)
        result = inferencer(img, pred_score_thr=0., return_vis=False,
                            no_save_pred=True)
    prediction = result['predictions'][0]
    assert type(inferencer.model.backbone).__module__.startswith('mmvisattn')
    assert len(prediction['bboxes']) == len(prediction['scores']) > 0
    assert len(prediction['masks']) == len(prediction['bboxes'])


@pytest.mark.slow
def test_mmseg_inferencer_runs_our_config(seg_run, shapes):
    """mmseg's MMSegInferencer on the demo UperNet config and its trained
    checkpoint (a whole mmengine checkpoint: read inside
    ``mmvisattn.runtime()``, as a user's script reads it): a label map of
    the image's size."""
    from mmseg.apis import MMSegInferencer

    import mmvisattn
    img = osp.join(shapes, 'ade', 'images', 'validation', 'val_00000.png')
    with default_scope_guard(), mmvisattn.runtime():
        inferencer = MMSegInferencer(
            model=SEG_CONFIG, weights=osp.join(seg_run, 'iter_2.pth'),
            device='cpu')
        result = inferencer(img, return_datasamples=False, show=False)
    assert type(inferencer.model.backbone).__module__.startswith('mmvisattn')
    assert result['predictions'].shape == (SIZE, SIZE)
    assert set(np.unique(result['predictions'])) <= {0, 1, 2}
