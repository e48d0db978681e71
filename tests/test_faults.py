"""Faults: SIGKILL during training (also mid-checkpoint-write) and
``--resume``; damaged checkpoints given to tools/test.py."""
import glob
import json
import os
import os.path as osp
import random
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

import mmvisattn
from helpers import REPO, generate_shapes
from helpers.seg_config import small_seg_config, tool_env
from mmvisattn.checkpoint import CheckpointError, read_checkpoint
from mmvisattn.engine.resume import latest_complete_checkpoint

ITERS = 12


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp('faults'))
    generate_shapes(osp.join(folder, 'shapes'), num_train=8, num_val=3,
                    size=(64, 64))
    # drop path (torch RNG in the model) and random flips (numpy RNG in the
    # data pipeline) on, so that exact losses need both RNG streams resumed;
    # max_keep_ckpts=1 is where mmengine deletes the only complete
    # checkpoint before writing the next one
    config = small_seg_config(
        folder, osp.join(folder, 'shapes', 'ade') + '/', 2,
        max_iters=ITERS, probe=False, drop_path=0.2, embed_dims=64,
        max_keep=1, flip=True, name='faults.py')
    reference = osp.join(folder, 'reference')
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', config, '--work-dir', reference],
        cwd=REPO, env=tool_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:]
    return dict(folder=folder, config=config, reference=reference,
                log=proc.stdout)


@pytest.mark.slow
def test_train_tool_says_which_hooks_it_adds_and_prints_no_false_alarm(
        setup):
    """The fault-tolerance hooks are named in the log, not added silently;
    and a newcomer's run does not print the finite-loss check's
    ``requires_grad`` warning."""
    log = setup['log']
    assert ('fault tolerance: default_hooks.checkpoint: CheckpointHook -> '
            'mmvisattn.AtomicCheckpointHook') in log
    for name in ('RNGStateHook', 'FiniteLossHook', 'FiniteInputHook',
                 'RankMeanLossHook'):
        assert f'fault tolerance: custom_hooks: + mmvisattn.{name}' in log
    assert 'requires_grad=True to a scalar' not in log


@pytest.mark.slow
def test_fault_tolerance_can_be_turned_off(setup, tmp_path):
    """``--no-fault-tolerance``: the config's hooks as written (mmengine's
    CheckpointHook, so no RNG state in the checkpoint)."""
    work = str(tmp_path / 'plain')
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', setup['config'], '--work-dir', work,
         '--no-fault-tolerance', '--cfg-options', 'train_cfg.max_iters=2'],
        cwd=REPO, env=tool_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert 'fault tolerance off' in proc.stdout
    assert 'fault tolerance: ' not in proc.stdout
    with mmvisattn.runtime():  # a whole mmengine checkpoint
        ckpt = torch.load(osp.join(work, 'iter_2.pth'), weights_only=True)
    assert 'rng_state' not in ckpt


def test_fault_tolerant_training_keeps_other_hooks_and_arguments():
    from mmengine.config import Config

    from mmvisattn.engine import fault_tolerant_training
    cfg = Config(dict(
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=3,
                                           max_keep_ckpts=1)),
        custom_hooks=[dict(type='mmvisattn.FiniteLossHook')]))
    changes = fault_tolerant_training(cfg)
    assert cfg.default_hooks.checkpoint == dict(
        type='mmvisattn.AtomicCheckpointHook', interval=3, max_keep_ckpts=1)
    assert [h['type'] for h in cfg.custom_hooks] == [
        'mmvisattn.FiniteLossHook', 'mmvisattn.RNGStateHook',
        'mmvisattn.FiniteInputHook', 'mmvisattn.RankMeanLossHook']
    assert len(changes) == 4
    custom = Config(dict(default_hooks=dict(
        checkpoint=dict(type='MyCheckpointHook'))))
    fault_tolerant_training(custom)
    assert custom.default_hooks.checkpoint.type == 'MyCheckpointHook'


def scalar_logs(work_dir):
    """{iteration: loss} from every run's json log in ``work_dir`` (full
    precision); an iteration logged by two runs must agree."""
    losses = {}
    for path in glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')):
        with open(path) as f:
            for line in f:
                entry = json.loads(line)
                if 'loss' in entry:
                    it = entry['iter']
                    assert losses.get(it, entry['loss']) == entry['loss'], it
                    losses[it] = entry['loss']
    return losses


class Training:
    """tools/train.py in the background, its output in a file."""

    def __init__(self, config, work_dir, *args):
        os.makedirs(work_dir, exist_ok=True)
        self.log = osp.join(work_dir, f'stdout_{time.time_ns()}.txt')
        self.proc = subprocess.Popen(
            [sys.executable, 'tools/train.py', config, '--work-dir', work_dir,
             *args], cwd=REPO, env=tool_env(), stdout=open(self.log, 'w'),
            stderr=subprocess.STDOUT)

    @property
    def output(self):
        with open(self.log) as f:
            return f.read()

    def wait_for(self, pattern, timeout=600):
        end = time.time() + timeout
        while time.time() < end:
            if re.search(pattern, self.output):
                return
            assert self.proc.poll() is None, self.output[-4000:]
            time.sleep(0.02)
        raise AssertionError(f'{pattern!r} never printed')

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@pytest.mark.slow
def test_sigkill_anywhere_then_resume_continues_exactly(setup):
    seed = int(os.environ.get('MMVISATTN_FAULT_SEED', time.time_ns() % 10**6))
    print(f'fault test seed {seed} (MMVISATTN_FAULT_SEED to repeat)')
    rng = random.Random(seed)
    work = osp.join(setup['folder'], 'killed')
    config = setup['config']

    # 1. killed while iter_4.pth is being written
    run = Training(config, work)
    partial = osp.join(work, '.iter_4.pth.partial')
    while not osp.exists(partial):
        assert run.proc.poll() is None, 'run ended before the 2nd checkpoint'
    run.kill()
    assert not osp.exists(osp.join(work, 'iter_4.pth')) or \
        read_checkpoint(osp.join(work, 'iter_4.pth'))
    with open(osp.join(work, 'last_checkpoint')) as f:
        assert f.read() == osp.join(work, 'iter_2.pth')
    # the only kept checkpoint survived the interrupted write of its successor
    assert read_checkpoint(osp.join(work, 'iter_2.pth'))['meta']['iter'] == 2

    # 2. resumed, then killed at a random moment of training
    run = Training(config, work, '--resume')
    run.wait_for(r'resumed epoch: \d+, iter: 2')
    assert 'removing ' + partial in run.output
    run.wait_for(r'Iter\(train\) \[\s*3/')
    time.sleep(rng.uniform(0, 1.5))
    run.kill()
    latest, partials = latest_complete_checkpoint(work)
    resumed_at = read_checkpoint(latest)['meta']['iter'] if latest else 0
    for path in glob.glob(osp.join(work, 'iter_*.pth')):
        read_checkpoint(path)  # never a half-written file under this name

    # 3. resumed to the end
    run = Training(config, work, '--resume')
    assert run.proc.wait(timeout=900) == 0, run.output[-4000:]
    if resumed_at:
        assert re.search(rf'resumed epoch: \d+, iter: {resumed_at}\b',
                         run.output)

    # every logged loss, in all three runs, equals the uninterrupted run's
    reference = scalar_logs(setup['reference'])
    killed = scalar_logs(work)
    assert sorted(reference) == list(range(1, ITERS + 1))
    assert sorted(killed) == list(range(1, ITERS + 1))
    assert killed == reference
    # and so do the final weights, optimizer moments and scheduler state
    ours = read_checkpoint(osp.join(work, f'iter_{ITERS}.pth'))
    theirs = read_checkpoint(
        osp.join(setup['reference'], f'iter_{ITERS}.pth'))
    for key, value in theirs['state_dict'].items():
        assert torch.equal(ours['state_dict'][key], value), key
    for a, b in zip(ours['optimizer']['state'].values(),
                    theirs['optimizer']['state'].values()):
        for key in b:
            assert torch.equal(a[key], b[key])
    assert ours['param_schedulers'] == theirs['param_schedulers']
    assert ours['meta']['iter'] == ITERS


def test_resume_without_a_complete_checkpoint_starts_over(tmp_path):
    work = str(tmp_path)
    with open(tmp_path / 'iter_2.pth', 'wb') as f:
        f.write(b'PK\x03\x04 cut short')
    with open(tmp_path / 'last_checkpoint', 'w') as f:
        f.write(str(tmp_path / 'iter_2.pth'))
    latest, _ = latest_complete_checkpoint(work)
    assert latest is None


@pytest.fixture(scope='module')
def damaged(setup, tmp_path_factory):
    folder = tmp_path_factory.mktemp('damaged')
    good = osp.join(setup['reference'], f'iter_{ITERS}.pth')
    blob = open(good, 'rb').read()
    files = {
        'truncated.pth': blob[:len(blob) // 3],
        'empty.pth': b'',
        'text.pth': b'{"not": "a checkpoint"}',
        # valid zip directory, damaged pickle: flip bytes inside data.pkl
        'corrupt.pth': blob[:200] + bytes(b ^ 0xFF for b in blob[200:400]) +
        blob[400:],
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    # another architecture: the same model with a wider backbone
    other = small_seg_config(str(folder), setup['folder'] + '/shapes/ade/',
                             2, probe=False, embed_dims=48, name='wide.py')
    return folder, other


@pytest.mark.parametrize('name,reason', [
    ('truncated.pth', 'truncated'),
    ('empty.pth', 'empty file'),
    ('text.pth', 'not a PyTorch checkpoint'),
    ('corrupt.pth', 'corrupt checkpoint'),
])
@pytest.mark.slow
def test_read_checkpoint_names_the_file_and_the_damage(damaged, name, reason):
    folder, _ = damaged
    with pytest.raises(CheckpointError, match=reason) as e:
        read_checkpoint(str(folder / name))
    assert str(folder / name) in str(e.value)


@pytest.mark.slow
def test_test_tool_on_damaged_and_foreign_checkpoints(setup, damaged):
    folder, other = damaged
    good = osp.join(setup['reference'], f'iter_{ITERS}.pth')
    cases = [(setup['config'], str(folder / 'truncated.pth'), 'truncated'),
             (setup['config'], str(folder / 'corrupt.pth'), 'corrupt'),
             (other, good, 'does not match the model built from the config')]
    for config, ckpt, reason in cases:
        proc = subprocess.run(
            [sys.executable, 'tools/test.py', config, ckpt], cwd=REPO,
            env=tool_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith('tools/test.py: ' + ckpt), last
        assert reason in last, last
    assert 'shape mismatches: backbone.' in last


def _rng_rank(rank, world, port, out):
    import types

    import torch.distributed as dist
    from mmengine.hooks import CheckpointHook

    from mmvisattn.engine import RNGStateHook
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=world)
    torch.manual_seed(100 + rank)  # ranks draw differently
    runner = types.SimpleNamespace(
        hooks=[CheckpointHook(interval=2, by_epoch=False)], iter=1,
        max_iters=10, logger=None)
    hook = RNGStateHook()
    hook.after_train_iter(runner, 1)  # iteration 2 ends: a checkpoint
    ckpt = dict(meta=dict(iter=2))
    if rank == 0:  # mmengine's save_checkpoint is master-only
        hook.before_save_checkpoint(runner, ckpt)
    want = torch.rand(4)  # what an uninterrupted run draws next
    shared = [ckpt]
    dist.broadcast_object_list(shared, src=0)  # every rank reads the file
    torch.manual_seed(0)  # the resumed run re-seeds
    resumed = RNGStateHook()
    resumed.after_load_checkpoint(runner, shared[0])
    runner.iter = 2
    resumed.before_train_iter(runner, 0)
    torch.save(dict(want=want, got=torch.rand(4)),
               osp.join(out, f'rank{rank}.pth'))
    dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.dist
def test_rng_state_is_saved_and_restored_per_rank(tmp_path):
    """Rank 0 writes the checkpoint, but every rank's RNG state is in it
    (gathered where a checkpoint follows, since mmengine's save runs on
    rank 0 only) and each rank resumes its own stream; before, every rank
    got rank 0's state."""
    import socket

    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    mp.spawn(_rng_rank, args=(2, port, str(tmp_path)), nprocs=2)
    results = [torch.load(tmp_path / f'rank{r}.pth') for r in range(2)]
    for r in results:
        torch.testing.assert_close(r['got'], r['want'], rtol=0, atol=0)
    assert not torch.equal(results[0]['want'], results[1]['want'])
