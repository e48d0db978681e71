"""tools/train.py and tools/test.py end to end, as a user runs them."""
import json
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch

# the safe-load allow-list: this module torch.loads the checkpoints the
# tools write (the one thing importing mmvisattn registers)
import mmvisattn
from helpers import REPO, generate_shapes, load_tool, shared_dataset
from helpers.det_config import DEMO_CONFIG, small_det_config

MAIN_CONFIG = osp.join(REPO, 'configs', 'cascade_swin_t_coco.py')


def run_tool(*args, cwd=REPO, timeout=900):
    proc = subprocess.run([sys.executable, *args], cwd=cwd, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc.stdout


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('shapes'))
    return generate_shapes(root, num_train=8, num_val=3, size=(96, 96))


@pytest.fixture(scope='module')
def small_cascade(tmp_path_factory):
    """The demo config with a narrow model (tests/helpers/det_config.py):
    what these tests check is the tools' wiring, not the model's size."""
    return small_det_config(tmp_path_factory.mktemp('configs'))


def demo_options(root, max_iters):
    return [
        '--cfg-options', f'data_root={root}/',
        f'train_dataloader.dataset.data_root={root}/',
        f'test_dataloader.dataset.data_root={root}/',
        f'test_evaluator.ann_file={root}/annotations/instances_val.json',
        f'train_cfg.max_iters={max_iters}',
        'default_hooks.checkpoint.interval=2',
        'default_hooks.checkpoint.max_keep_ckpts=3',
        'default_hooks.logger.interval=1',
        'randomness.seed=0',
        # a few iterations from scratch score below mmdet's 0.05 threshold;
        # keep every detection so that COCO evaluation has results to score
        'model.test_cfg.rcnn.score_thr=0.0',
    ]


def test_demo_data_is_deterministic(tmp_path):
    a = generate_shapes(str(tmp_path / 'a'), 3, 1, (64, 64), seed=3)
    b = generate_shapes(str(tmp_path / 'b'), 3, 1, (64, 64), seed=3)
    for name in ('instances_train.json', 'instances_val.json'):
        with open(osp.join(a, 'annotations', name)) as fa, \
                open(osp.join(b, 'annotations', name)) as fb:
            ja, jb = json.load(fa), json.load(fb)
        assert ja == jb and ja['annotations']


@pytest.mark.slow
def test_train_save_resume_test(shapes, small_cascade, tmp_path):
    work = str(tmp_path / 'work')
    out = run_tool('tools/train.py', small_cascade, '--work-dir', work,
                   *demo_options(shapes, 2))
    ckpt = osp.join(work, 'iter_2.pth')
    assert osp.isfile(ckpt), out[-3000:]

    # The checkpoint holds numpy objects and HistoryBuffers that torch>=2.6's
    # weights_only loader rejects, importing mmvisattn or not, and reads
    # inside mmvisattn.runtime() (the scope every tool runs in).
    probe = ('import sys, torch, mmvisattn, contextlib\n'
             'scope = mmvisattn.runtime() if len(sys.argv) > 2 else '
             'contextlib.nullcontext()\n'
             'with scope:\n'
             '    torch.load(sys.argv[1])\n')
    plain = subprocess.run([sys.executable, '-c', probe, ckpt],
                           capture_output=True, text=True)
    assert plain.returncode != 0 and 'Unsupported global' in plain.stderr
    subprocess.run([sys.executable, '-c', probe, ckpt, 'with'], check=True)

    out = run_tool('tools/train.py', small_cascade, '--work-dir', work,
                   '--resume', *demo_options(shapes, 4))
    assert re.search(r'resumed epoch: \d+, iter: 2', out), out[-3000:]
    assert osp.isfile(osp.join(work, 'iter_4.pth'))
    with mmvisattn.runtime():
        state = torch.load(osp.join(work, 'iter_4.pth'), map_location='cpu')
    assert state['meta']['iter'] == 4
    assert state['optimizer']['state'], 'optimizer state was not saved'

    out = run_tool('tools/test.py', small_cascade,
                   osp.join(work, 'iter_4.pth'), '--work-dir', work,
                   *demo_options(shapes, 4))
    assert re.search(r'coco/bbox_mAP: [\d.]+', out), out[-3000:]
    assert re.search(r'coco/segm_mAP: [\d.]+', out)


@pytest.mark.slow
def test_coco128_train_then_test(tmp_path):
    """The paper's config on real COCO annotations (polygons, crowd RLE,
    a grayscale image), shrunk through --cfg-options only: Cascade Mask
    R-CNN's end-to-end run (the zoo's Cascade configs take a loss step in
    tests/test_zoo_coco.py). 2 training images in one batch, validation at
    the epoch's end and tools/test.py on the grayscale and a crowd image."""
    root = shared_dataset('coco128')
    with open(osp.join(root, 'annotations', 'instances.json')) as f:
        coco = json.load(f)
    crowd = {a['image_id'] for a in coco['annotations'] if a['iscrowd']}
    gray = {i['id'] for i in coco['images'] if i['file_name'] ==
            '000000000086.jpg'}
    keep = gray | set(sorted(crowd)[:1])
    subset = dict(
        coco,
        images=[i for i in coco['images'] if i['id'] in keep],
        annotations=[a for a in coco['annotations'] if a['image_id'] in keep])
    subset_file = str(tmp_path / 'coco128_val_subset.json')
    with open(subset_file, 'w') as f:
        json.dump(subset, f)

    work = str(tmp_path / 'work')
    pipe = 'train_dataloader.dataset.pipeline.3.transforms'
    common = [
        f'train_dataloader.dataset.data_root={root}/',
        'train_dataloader.dataset.ann_file=annotations/instances.json',
        'train_dataloader.dataset.data_prefix.img=images/',
        f'test_dataloader.dataset.data_root={root}/',
        f'test_dataloader.dataset.ann_file={subset_file}',
        'test_dataloader.dataset.data_prefix.img=images/',
        'test_dataloader.dataset.pipeline.1.scale=(320,256)',
        f'test_evaluator.ann_file={subset_file}',
        f'val_dataloader.dataset.data_root={root}/',
        f'val_dataloader.dataset.ann_file={subset_file}',
        'val_dataloader.dataset.data_prefix.img=images/',
        'val_dataloader.dataset.pipeline.1.scale=(320,256)',
        f'val_evaluator.ann_file={subset_file}',
        'val_dataloader.num_workers=0',
        'val_dataloader.persistent_workers=False',
        'model.test_cfg.rcnn.score_thr=0.0',
        'model.test_cfg.rcnn.max_per_img=20',
        'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False',
        'test_dataloader.num_workers=0',
        'test_dataloader.persistent_workers=False',
    ]
    run_tool(
        'tools/train.py', MAIN_CONFIG, '--work-dir', work, '--cfg-options',
        *common, 'model.backbone.init_cfg=None',
        f'{pipe}.0.0.scales=[(320,256)]', f'{pipe}.1.0.scales=[(320,224)]',
        f'{pipe}.1.1.crop_size=(160,224)', f'{pipe}.1.2.scales=[(320,256)]',
        'train_dataloader.dataset.indices=2', 'train_cfg.max_epochs=1',
        'default_hooks.logger.interval=1',
        'default_hooks.checkpoint.save_optimizer=False')
    ckpt = osp.join(work, 'epoch_1.pth')
    assert osp.isfile(ckpt)
    out = run_tool('tools/test.py', MAIN_CONFIG, ckpt, '--work-dir', work,
                   '--cfg-options', *common, 'model.backbone.init_cfg=None')
    assert 'Average Precision' in out
    assert re.search(r'coco/bbox_mAP: [\d.]+', out), out[-3000:]
    assert re.search(r'coco/segm_mAP: [\d.]+', out)
    assert re.search(r'\[{0}/{0}\]'.format(len(keep)), out), out[-3000:]


@pytest.mark.slow
def test_test_tool_refuses_missing_checkpoint(tmp_path):
    proc = subprocess.run(
        [sys.executable, 'tools/test.py', DEMO_CONFIG,
         str(tmp_path / 'nope.pth')], cwd=REPO, capture_output=True,
        text=True)
    assert proc.returncode != 0 and 'nope.pth' in proc.stderr


@pytest.mark.slow
def test_mmseg_config_through_the_same_tools(seg_demo_run):
    """tools/train.py and tools/test.py dispatch on the config's scope: the
    demo UperNet run of tests/conftest.py (seg_demo_run)."""
    assert re.search(r'Iter\(train\) \[2/2\]', seg_demo_run['train_out'])
    assert osp.isfile(seg_demo_run['ckpt'])
    out = seg_demo_run['test_out']
    assert re.search(r'mIoU: [\d.]+', out), out[-3000:]
    assert 'square' in out and 'triangle' in out  # per-class IoU table


@pytest.mark.slow
@pytest.mark.dist
def test_torchrun_two_cpu_processes(shapes, small_cascade, tmp_path):
    """tools/dist_train.sh and dist_test.sh on a machine without GPUs."""
    work = str(tmp_path / 'work')
    env = dict(os.environ, PORT=str(29500 + os.getpid() % 1000))
    options = demo_options(shapes, 2) + ['train_dataloader.batch_size=1']

    def run(script, *args):
        proc = subprocess.run(['bash', script, *args], cwd=REPO, env=env,
                              timeout=900, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        assert proc.returncode == 0, proc.stdout[-6000:]
        return proc.stdout

    out = run('tools/dist_train.sh', small_cascade, '2', '--work-dir', work,
              *options)
    assert 'distributed over gloo with 2 CPU processes' in out
    assert osp.isfile(osp.join(work, 'iter_2.pth'))
    out = run('tools/dist_test.sh', small_cascade,
              osp.join(work, 'iter_2.pth'), '2', '--work-dir', work, *options)
    # 3 held-out images, split over 2 ranks and gathered for one COCO eval
    assert re.search(r'Iter\(test\) \[2/2\]', out), out[-3000:]
    assert re.search(r'coco/bbox_mAP: [\d.]+', out), out[-3000:]


@pytest.mark.slow
def test_profile_train_step_reports_where_the_step_goes(shapes, small_cascade,
                                                        capsys):
    """dev/profile_train_step.py builds the demo detector
    as tools/train.py does, times a step and splits one profiled step into
    the groups docs/benchmarks.md quotes; the RoI heads' mmcv RoIAlign shows
    up as an mmcv op, the optimizer's step beside them."""
    tool = load_tool('dev/profile_train_step.py')
    options = demo_options(shapes, 10)[1:]
    tool.main([small_cascade, '--warmup', '1', '--steps', '1',
               '--cfg-options', *options])
    printed = capsys.readouterr().out
    assert re.search(r'OptimWrapper, \d+ threads; step seconds: [\d.]+',
                     printed), printed
    shares = dict(re.findall(r'^\| ([a-zA-Z ]+) \| \d+ \| ([\d.]+)%',
                             printed, re.M))
    assert set(shares) == {'convolutions', 'GEMMs', 'attention', 'mmcv ops',
                           'copies and casts', 'other'}, printed
    assert float(shares['mmcv ops']) > 0 and float(shares['GEMMs']) > 0
    assert abs(sum(map(float, shares.values())) - 100) < 0.5
    assert re.search(r'optimizer step with its element-wise ops: \d+ ms',
                     printed)
