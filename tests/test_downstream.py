"""A downstream project (demo/downstream/) inherits our configs through
``read_base()`` and trains, resumes and tests under the peers' own entry
points: mmdet's ``tools/train.py`` and ``tools/test.py`` from mmdet's
installed package, ``mim train mmdet`` / ``mim test mmdet``, and mmseg's
own tools. Nothing of ours runs first: the configs name
``SafeCheckpointLoadingHook``, and stock mmengine finds the base configs
through the installed package (the editable install of ``make install``,
or a wheel)."""
import os
import os.path as osp
import pickle
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from helpers import REPO, generate_shapes
from mmvisattn.engine import SafeCheckpointLoadingHook

PROJECT = osp.join(REPO, 'demo', 'downstream')
DET = 'configs/cascade-mask-rcnn_swin-t_shapes.py'
SEG = 'configs/upernet_swin-t_shapes-ade.py'


def peer_tools(package):
    module = __import__(package)
    return osp.join(osp.dirname(module.__file__), '.mim', 'tools')


def stock_env():
    """The environment a user's shell has: no PYTHONPATH of ours."""
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    env.pop('PYTHONPATH', None)
    return env


def run(cwd, *command, timeout=900, fails=False):
    proc = subprocess.run([str(c) for c in command], cwd=cwd, env=stock_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    assert (proc.returncode != 0) == fails, proc.stdout[-6000:]
    return proc.stdout


# ------------------------------------------------------- the resume hook
def mmengine_checkpoint(path):
    """What mmengine's checkpoints hold beside tensors: a message hub with
    HistoryBuffers, numpy values in the meta."""
    from mmengine.logging import MessageHub
    hub = MessageHub.get_instance('downstream-hook-test')
    hub.update_scalar('train/loss', 1.5)
    torch.save(dict(meta=dict(seed=np.int64(0), iter=2),
                    message_hub=hub.state_dict(),
                    state_dict=dict(w=torch.ones(2))), path)
    return path


def test_the_hook_allows_mmengine_checkpoints_while_the_runner_loads(
        tmp_path):
    path = mmengine_checkpoint(tmp_path / 'iter_2.pth')
    with pytest.raises(pickle.UnpicklingError, match='weights_only'):
        torch.load(path)  # torch's default: weights_only=True
    before = set(torch.serialization.get_safe_globals())
    hook = SafeCheckpointLoadingHook()
    hook.before_run(None)  # before the runner's load_or_resume
    hook.before_run(None)  # entered once however often it is called
    loaded = torch.load(path)
    assert loaded['meta']['iter'] == 2
    assert 'train/loss' in loaded['message_hub']['log_scalars']
    hook.before_train(None)  # the loop starts: left
    assert set(torch.serialization.get_safe_globals()) == before
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)
    hook.after_run(None)  # leaving twice changes nothing
    assert set(torch.serialization.get_safe_globals()) == before


def test_the_hook_keeps_what_the_user_allowed(tmp_path):
    path = mmengine_checkpoint(tmp_path / 'iter_2.pth')

    class Mine:
        pass

    torch.serialization.add_safe_globals([Mine])
    try:
        before = set(torch.serialization.get_safe_globals())
        for leave in ('before_val', 'before_test', 'after_run'):
            hook = SafeCheckpointLoadingHook()
            hook.before_run(None)
            torch.load(path)
            assert Mine in torch.serialization.get_safe_globals()
            getattr(hook, leave)(None)
            assert set(torch.serialization.get_safe_globals()) == before
    finally:
        torch.serialization.clear_safe_globals()


def test_the_hook_is_found_by_name_and_by_class():
    from mmengine.registry import HOOKS

    import mmvisattn.registry
    assert mmvisattn.registry.HOOKS.get('SafeCheckpointLoadingHook') is \
        SafeCheckpointLoadingHook
    built = HOOKS.build(dict(type='mmvisattn.SafeCheckpointLoadingHook'))
    assert isinstance(built, SafeCheckpointLoadingHook)
    assert built.priority == 'VERY_HIGH'


# ------------------------------------- read_base() under stock mmengine
READ_CONFIG = (
    'import sys\n'
    'from mmengine.config import Config\n'
    'from mmengine.config.utils import MODULE2PACKAGE\n'
    'cfg = Config.fromfile(sys.argv[1])\n'
    'assert not [m for m in sys.modules if m.startswith("mmvisattn")]\n'
    'assert "mmvisattn" not in MODULE2PACKAGE\n'
    'heads = cfg.model.roi_head.bbox_head\n'
    'print("classes", [h.num_classes for h in heads])\n'
    'print("backbone", cfg.model.backbone.type.__module__,'
    ' cfg.model.backbone.type.__name__)\n'
    'import mmvisattn\n'
    'print("package", mmvisattn.__file__)\n')


def read_config(python, cwd):
    out = run(cwd, python, '-c', READ_CONFIG, osp.join(PROJECT, DET))
    assert 'classes [3, 3, 3]' in out, out
    assert 'backbone mmvisattn.models.backbones.swin SwinTransformer' in out
    return re.search(r'^package (.*)$', out, re.M).group(1)


@pytest.mark.slow  # starts a process
def test_read_base_under_stock_mmengine_in_this_install(tmp_path):
    """``make install``'s editable install, as the suite runs in it: the
    package file comes from this checkout."""
    package = read_config(sys.executable, tmp_path)
    assert osp.realpath(package) == osp.realpath(
        osp.join(REPO, 'mmvisattn', '__init__.py'))


@pytest.mark.slow  # builds a wheel, a venv, starts processes
def test_read_base_under_stock_mmengine_in_a_wheel_install(tmp_path):
    """``pip wheel .``, the wheel installed in a new venv (the stack from the
    system's site-packages, mmvisattn from the wheel alone)."""
    wheels, venv, source = (tmp_path / 'wheels', tmp_path / 'venv',
                            tmp_path / 'source')
    # built from a copy: the build leaves build/ and egg-info beside setup.py
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        '.git', 'build', 'work_dirs', 'data', '*.egg-info', '__pycache__'))
    run(source, sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps',
        '--no-build-isolation', '-w', wheels, source)
    wheel, = wheels.glob('mmvisattn-*.whl')
    run(tmp_path, sys.executable, '-m', 'venv', '--system-site-packages',
        venv)
    python = venv / 'bin' / 'python'
    run(tmp_path, python, '-m', 'pip', 'install', '-q', '--no-deps',
        '--force-reinstall', wheel)
    package = read_config(python, tmp_path)
    assert osp.realpath(package).startswith(osp.realpath(venv)), package
    listing = run(tmp_path, python, '-m', 'pip', 'show', '-f', 'mmvisattn')
    assert 'mmvisattn/configs/swin/cascade_mask_rcnn_swin_t_p4_w7_fpn_' \
        'giou_4conv1f_ms_crop_3x_coco.py' in listing
    assert not re.search(r'^\s*(dev|tools|tests|mmvisattn_tools)/', listing,
                         re.M), listing


# ------------------------------------- the peers' tools train, resume, test
@pytest.fixture(scope='module')
def project(tmp_path_factory):
    """demo/downstream's configs in a folder of their own, outside this
    checkout, with the shapes data beside them."""
    root = tmp_path_factory.mktemp('downstream')
    shutil.copytree(osp.join(PROJECT, 'configs'), root / 'configs')
    generate_shapes(str(root / 'data' / 'shapes'), num_train=8, num_val=2,
                    size=(96, 96))
    return root


def train_resume_test(project, work, train, test, config):
    """Train 2 iterations, resume to the config's 4, test the last
    checkpoint; the three outputs."""
    first = run(project, *train, config, '--work-dir', work,
                '--cfg-options', 'train_cfg.max_iters=2')
    assert osp.isfile(osp.join(project, work, 'iter_2.pth')), first[-3000:]
    resumed = run(project, *train, config, '--work-dir', work, '--resume')
    assert re.search(r'resumed epoch: \d+, iter: 2', resumed), resumed[-3000:]
    assert osp.isfile(osp.join(project, work, 'iter_4.pth'))
    tested = run(project, *test(osp.join(work, 'iter_4.pth')), '--work-dir',
                 work)
    return first, resumed, tested


@pytest.mark.slow  # trains through the peer's tools
def test_mmdet_tools_train_resume_and_test(project):
    tools = peer_tools('mmdet')
    *_, tested = train_resume_test(
        project, 'work_dirs/det',
        [sys.executable, osp.join(tools, 'train.py')],
        lambda ckpt: [sys.executable, osp.join(tools, 'test.py'), DET, ckpt],
        DET)
    assert re.search(r'coco/bbox_mAP: \S+', tested), tested[-3000:]
    assert re.search(r'coco/segm_mAP: \S+', tested), tested[-3000:]
    # what the hook is for: without it mmdet's test.py cannot read the
    # checkpoint under torch's safe loader
    refused = run(project, sys.executable, osp.join(tools, 'test.py'), DET,
                  'work_dirs/det/iter_4.pth', '--work-dir', 'work_dirs/bare',
                  '--cfg-options', 'custom_hooks=[]', fails=True)
    assert 'Unsupported global' in refused, refused[-3000:]
    shutil.rmtree(project / 'work_dirs' / 'det')  # 1 GB a checkpoint


@pytest.mark.slow  # trains through mim
def test_mim_train_resume_and_test(project):
    mim = [sys.executable, '-m', 'mim']
    *_, tested = train_resume_test(
        project, 'work_dirs/mim', [*mim, 'train', 'mmdet'],
        lambda ckpt: [*mim, 'test', 'mmdet', DET, '--checkpoint', ckpt],
        DET)
    assert re.search(r'coco/bbox_mAP: \S+', tested), tested[-3000:]
    shutil.rmtree(project / 'work_dirs' / 'mim')


@pytest.mark.slow  # trains through the peer's tools
def test_mmseg_tools_train_resume_and_test(project):
    tools = peer_tools('mmseg')
    *_, tested = train_resume_test(
        project, 'work_dirs/seg',
        [sys.executable, osp.join(tools, 'train.py')],
        lambda ckpt: [sys.executable, osp.join(tools, 'test.py'), SEG, ckpt],
        SEG)
    assert re.search(r'mIoU: \S+', tested), tested[-3000:]
    shutil.rmtree(project / 'work_dirs' / 'seg')
