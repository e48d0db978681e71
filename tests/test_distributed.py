"""Many processes through mmengine (torchrun + gloo on this CPU machine):
lock-step ranks, rank-0-only outputs, gathered evaluation, a 2x1 run that
tracks a 1x2 run, SyncBN that really synchronises, the slurm script, every
backbone family under DDP, and RSWAttViT's gradients under DDP."""
import os
import os.path as osp
import re
import stat
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from helpers import HELPERS, REPO, generate_shapes
from helpers.seg_config import ITERS, small_seg_config, tool_env

# Every test here starts processes, most of them several.
pytestmark = [pytest.mark.slow, pytest.mark.dist]

# Per-iteration losses of 2 processes x batch 1 (logged as the rank mean)
# against 1 process x batch 2, same images in the same order, no random
# augmentation, drop path or dropout, SyncBN: equal up to float summation
# order, i.e. in the 4 decimals of mmengine's log (measured: identical for 4
# iterations).
LOSS_ATOL = 1.5e-4
# The final weight checksums, relative: 1.2e-5 apart measured with the
# relative position tables starting at zero (mmdet's and mmseg's Swin
# initialisation, which ours follows), 6e-7 with them drawn: AdamW's first
# steps move every parameter by about the learning rate whatever its
# gradient's size, so float-order noise in small gradients shows in the
# weights. 4x the measured gap.
CHECKSUM_RTOL = 5e-5


def run(cmd, env=None, timeout=900):
    proc = subprocess.run(cmd, cwd=REPO, env=env or tool_env(),
                          timeout=timeout, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc.stdout


def logged_losses(output):
    """{iteration: loss} from mmengine's training log lines."""
    return {
        int(m.group(1)): float(m.group(2))
        for m in re.finditer(
            r'Iter\(train\) \[\s*(\d+)/\d+\].*?\sloss: ([\d.]+)', output)
    }


def probe(work_dir, rank):
    with open(osp.join(work_dir, f'probe_rank{rank}.txt')) as f:
        return [line.split() for line in f]


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('shapes'))
    generate_shapes(root, num_train=8, num_val=3, size=(64, 64))
    return osp.join(root, 'ade') + '/'


@pytest.fixture(scope='module')
def runs(shapes, tmp_path_factory):
    """One 2-process run (batch 1 each) and one 1-process run (batch 2)."""
    folder = str(tmp_path_factory.mktemp('dist'))
    one = osp.join(folder, 'one')
    two = osp.join(folder, 'two')
    out_one = run([
        sys.executable, 'tools/train.py',
        small_seg_config(folder, shapes, 2), '--work-dir', one
    ])
    out_two = run([
        'bash', 'tools/dist_train.sh',
        small_seg_config(folder, shapes, 1), '2', '--work-dir', two
    ])
    return dict(folder=folder, one=one, two=two, out_one=out_one,
                out_two=out_two)


def test_ranks_step_in_lock_step_with_equal_weights(runs):
    assert 'distributed over gloo with 2 CPU processes' in runs['out_two']
    assert re.search(r'Iter\(train\) \[\s*1/4\].* eta: ', runs['out_two'])
    rank0, rank1 = probe(runs['two'], 0), probe(runs['two'], 1)
    assert [r[0] for r in rank0] == [str(i) for i in range(1, ITERS + 1)]
    # DDP: after every step both replicas hold bit-identical weights
    assert rank0 == rank1


def test_only_rank_zero_writes_checkpoints_and_logs(runs):
    two = runs['two']
    assert sorted(f for f in os.listdir(two) if f.endswith('.pth')) == \
        ['iter_2.pth', 'iter_4.pth']
    logs = [
        osp.join(d, f) for d, _, files in os.walk(two) for f in files
        if f.endswith('.log')
    ]
    assert len(logs) == 1, logs
    # every training line is printed once (by rank 0), not once per rank
    assert len(re.findall(r'Iter\(train\) \[\s*1/', runs['out_two'])) == 1


def test_two_processes_track_one_process(runs):
    """2 x batch 1 with SyncBN and rank-mean logging vs 1 x batch 2."""
    one, two = logged_losses(runs['out_one']), logged_losses(runs['out_two'])
    assert sorted(one) == sorted(two) == list(range(1, ITERS + 1))
    print('losses 1x2:', one, '2x1:', two)
    for it in one:
        assert two[it] == pytest.approx(one[it], abs=LOSS_ATOL), (it, one, two)
    # and the weights after the last step (rank 0's checksum vs 1 process)
    final_one = float(probe(runs['one'], 0)[-1][1])
    final_two = float(probe(runs['two'], 0)[-1][1])
    print('weight checksums 1x2 / 2x1:', final_one, final_two)
    assert final_two == pytest.approx(final_one, rel=CHECKSUM_RTOL)


def test_syncbn_synchronises_under_ddp_and_is_bn_in_one_process(runs):
    # UperNet's pooling branch normalises 1x1 maps: with batch 1 per process
    # only a synchronised BN has 2 values per channel (plain BN raises)
    assert 'SyncBN synchronised over the group' in runs['out_two']
    assert re.search(r'SyncBatchNorm.*reverted to BatchNormXd',
                     runs['out_one']), runs['out_one'][-3000:]


def test_gathered_evaluation_equals_single_process(runs, shapes):
    config = small_seg_config(runs['folder'], shapes, 1)
    ckpt = osp.join(runs['two'], 'iter_4.pth')
    single = run([
        sys.executable, 'tools/test.py', config, ckpt, '--work-dir',
        osp.join(runs['folder'], 'test1')
    ])
    double = run([
        'bash', 'tools/dist_test.sh', config, ckpt, '2', '--work-dir',
        osp.join(runs['folder'], 'test2')
    ])

    def metrics(out):
        found = re.findall(r'(aAcc|mIoU|mAcc): ([\d.]+)', out)
        assert found, out[-3000:]
        return dict(found)

    assert metrics(double) == metrics(single)
    # mmseg's per-class table, printed once
    assert len(re.findall(r'\|\s+square\s+\|', double)) == 1
    # 3 images on 2 ranks: mmengine pads the sampler and drops the padding
    assert re.search(r'Iter\(test\) \[2/2\]', double)
    assert re.search(r'Iter\(test\) \[3/3\]', single)


def _sync_bn_worker(rank, init_file, x, out_dir):
    from mmvisattn.engine.cpu_distributed import CPUSyncBatchNorm
    dist.init_process_group('gloo', init_method=f'file://{init_file}',
                            rank=rank, world_size=2)
    torch.manual_seed(0)
    bn = CPUSyncBatchNorm(3, momentum=0.3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    part = x[rank:rank + 1].clone().requires_grad_()
    y = bn(part)
    (y * torch.arange(y.numel()).view_as(y).sin()).sum().backward()
    dist.all_reduce(bn.weight.grad)
    dist.all_reduce(bn.bias.grad)
    torch.save(
        dict(y=y.detach(), gx=part.grad, gw=bn.weight.grad,
             gb=bn.bias.grad, mean=bn.running_mean, var=bn.running_var),
        osp.join(out_dir, f'rank{rank}.pt'))
    dist.destroy_process_group()


def test_cpu_sync_batchnorm_equals_batchnorm_of_the_global_batch(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 4, 5) * 3 + 1
    mp.spawn(_sync_bn_worker, args=(str(tmp_path / 'init'), x,
                                    str(tmp_path)), nprocs=2)
    bn = torch.nn.BatchNorm2d(3, momentum=0.3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    full = x.clone().requires_grad_()
    y = bn(full)
    weights = torch.cat([torch.arange(y[:1].numel()).view_as(y[:1]).sin()] *
                        2)
    (y * weights).sum().backward()
    parts = [torch.load(tmp_path / f'rank{r}.pt') for r in range(2)]
    for r, p in enumerate(parts):
        torch.testing.assert_close(p['y'], y[r:r + 1].detach())
        torch.testing.assert_close(p['gx'], full.grad[r:r + 1],
                                   rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(p['gw'], bn.weight.grad)
        torch.testing.assert_close(p['gb'], bn.bias.grad)
        torch.testing.assert_close(p['mean'], bn.running_mean)
        torch.testing.assert_close(p['var'], bn.running_var)


def test_slurm_train_script_on_cpu_tasks(shapes, tmp_path):
    """tools/slurm_train.sh with an `srun` stand-in that starts the tasks on
    this node with SLURM's variables, as srun does (no scheduler here)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    srun = bin_dir / 'srun'
    srun.write_text('''#!/usr/bin/env bash
# one node: start --ntasks copies of the command with SLURM_* set
while [[ "$1" == -* ]]; do
  case "$1" in --ntasks=*) N="${1#--ntasks=}";; -p) shift;; esac; shift
done
pids=()
for ((i = 0; i < N; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NTASKS=$N SLURM_NODELIST=127.0.0.1 \\
    "$@" & pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done; exit $rc
''')
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    config = small_seg_config(str(tmp_path), shapes, 1, max_iters=2,
                              probe=False)
    work = str(tmp_path / 'work')
    env = tool_env(GPUS='2', GPUS_PER_NODE='0', CPUS_PER_TASK='1',
               PATH=f'{bin_dir}{os.pathsep}{os.environ["PATH"]}')
    env['MASTER_PORT'] = env.pop('PORT')
    out = run(['bash', 'tools/slurm_train.sh', 'cpu', 'job', config, work],
              env=env)
    assert 'distributed over gloo with 2 CPU processes' in out
    assert osp.isfile(osp.join(work, 'iter_2.pth'))


def test_every_backbone_family_trains_under_ddp(shapes, tmp_path):
    """Swin (with and without the HTC++ global block), Swin V2, the TNT pyramid,
    RSWAtt and the ResNet RSWAtt plug-in each train 2 iterations of a real
    UperNet under 2-process DDP with mmengine's default
    ``find_unused_parameters=False`` (an unused parameter, such as the TNT
    pyramid's class-token norm was, fails at the second iteration), and
    the ranks keep equal weights. One torchrun for all families
    (tests/helpers/ddp_families.py), to keep the suite's time."""
    run([sys.executable, '-m', 'torch.distributed.run',
         '--nproc_per_node', '2', '--master_port',
         str(29500 + os.getpid() % 300),
         osp.join(HELPERS, 'ddp_families.py'), shapes, str(tmp_path)])
    families = ('swin', 'swin-global-block', 'swinv2', 'tnt-pyramid',
                'rswatt', 'resnet-rswatt-plugin')
    for name in families:
        for rank in range(2):
            with open(tmp_path / f'{name}.rank{rank}.txt') as f:
                losses, weight_gap = f.read().rsplit(' ', 1)
            assert float(weight_gap) == 0.0, (name, rank)
            assert len(eval(losses)) == 2, (name, losses)


# RSWAttViT under DDP: the CIFAR-10 config's model (offset predictor, concat
# fusion, pixel position encoding, class-token readout), 'tiny' preset,
# CIFAR's own 32x32 images (a 2x2 patch map), in 2 spawned processes.
RSWATT_VIT_CIFAR = osp.join(
    REPO, 'configs', 'rswatt', 'rswatt-vit-b6-p16_1xb32-10e_cifar10-224px.py')
VIT_STEPS = 3


def _vit_batch(step, rank, size=2):
    """Images and labels of ``rank`` at ``step``, as a dataloader gives."""
    from mmpretrain.structures import DataSample
    gen = torch.Generator().manual_seed(100 * step + rank)
    images = [torch.randint(0, 256, (3, 32, 32), generator=gen,
                            dtype=torch.uint8) for _ in range(size)]
    labels = torch.randint(0, 10, (size, ), generator=gen).tolist()
    return dict(inputs=images,
                data_samples=[DataSample().set_gt_label(y) for y in labels])


def _vit_classifier():
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    import mmvisattn  # noqa: F401
    init_default_scope('mmpretrain')
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(RSWATT_VIT_CIFAR)
    cfg.model.backbone.update(arch='tiny', img_size=32)
    cfg.model.head.in_channels = 192
    cfg.model.data_preprocessor = cfg.data_preprocessor
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model


def _sgd(model):
    from mmengine.optim import build_optim_wrapper
    return build_optim_wrapper(model, dict(
        type='OptimWrapper', optimizer=dict(type='SGD', lr=0.01)))


def _rswatt_vit_worker(rank, init_file, out_dir):
    from mmvisattn.registry import MODEL_WRAPPERS
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'file://{init_file}',
                            rank=rank, world_size=2)
    model = _vit_classifier()
    # per step: the parameters whose gradient was accumulated (DDP's
    # find_unused_parameters=False fails the next step if one is missing)
    # and those whose gradient was not exactly zero on this rank
    reached, nonzero = set(), set()
    for name, p in model.named_parameters():
        def seen(p, name=name):
            reached.add(name)
            if p.grad.count_nonzero():
                nonzero.add(name)
        p.register_post_accumulate_grad_hook(seen)
    ddp = MODEL_WRAPPERS.build(dict(
        type='mmvisattn.CPUDistributedDataParallel', module=model,
        broadcast_buffers=False, find_unused_parameters=False))
    optim = _sgd(ddp)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    losses, missing, gradient = [], [], set()
    for step in range(VIT_STEPS):
        reached.clear()
        logs = ddp.train_step(_vit_batch(step, rank), optim)
        losses.append(float(logs['loss'].detach()))
        missing.append(sorted(trainable - reached))
        gradient |= nonzero
    dist.destroy_process_group()
    result = dict(losses=losses, missing=missing,
                  zero=sorted(trainable - gradient),
                  state={k: v.detach().clone()
                         for k, v in model.state_dict().items()})
    if rank == 0:  # one process on both ranks' images: DDP's mean gradient
        ref = _vit_classifier()
        ref_optim = _sgd(ref)
        for step in range(VIT_STEPS):
            b0, b1 = _vit_batch(step, 0), _vit_batch(step, 1)
            ref.train_step(dict(
                inputs=b0['inputs'] + b1['inputs'],
                data_samples=b0['data_samples'] + b1['data_samples']),
                ref_optim)
        result['reference'] = ref.state_dict()
    torch.save(result, osp.join(out_dir, f'vit_rank{rank}.pt'))


def test_rswatt_vit_trains_under_ddp_with_synchronised_gradients(tmp_path):
    """RSWAttViT as the CIFAR-10 config builds it ('tiny' preset, 32x32
    images) takes 3 SGD steps under 2-process DDP (gloo) with mmengine's
    default ``find_unused_parameters=False``: every parameter receives a
    gradient on every step, both ranks end with bit-identical weights, and
    those equal one process trained on both ranks' images.

    Every parameter outside the last layer's attention, the offset
    predictors of the other layers included, gets a non-zero gradient
    within the 3 steps (a predictor's hidden layer only from the second
    step: its output layer starts at zero). In the last layer the
    windowed path (today: its window predictor and its relative position
    tables) gets exactly zero: there the class token attends every token
    globally, and the patch tokens' outputs, which the windows shape, are
    not read by the class-token readout. The gradient still reaches those
    parameters (as zeros), so DDP does not count them unused."""
    mp.spawn(_rswatt_vit_worker,
             args=(str(tmp_path / 'init'), str(tmp_path)), nprocs=2)
    ranks = [torch.load(tmp_path / f'vit_rank{r}.pt') for r in range(2)]
    for r in ranks:
        assert len(r['losses']) == VIT_STEPS
        assert r['missing'] == [[]] * VIT_STEPS, r['missing']
    state0, state1 = ranks[0]['state'], ranks[1]['state']
    assert state0.keys() == state1.keys()
    for key in state0:
        assert torch.equal(state0[key], state1[key]), key
    for key, ref in ranks[0]['reference'].items():
        torch.testing.assert_close(state0[key], ref, rtol=1e-4, atol=1e-6,
                                   msg=key)
    print('max |DDP - one process|:', max(
        float((state0[k].float() - v.float()).abs().max())
        for k, v in ranks[0]['reference'].items()))
    last = 'backbone.layers.{}.attn.'.format(
        len({k.split('.')[2] for k in state0
             if k.startswith('backbone.layers.')}) - 1)
    print('exactly zero gradient:', ranks[0]['zero'])
    for r in ranks:
        assert all(n.startswith(last) for n in r['zero']), r['zero']
