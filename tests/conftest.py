"""pytest's hooks and fixtures for the whole suite; shared helpers live in
tests/helpers (test files import them from there).

- ``--whole-suite`` (``make test``): the run stops unless it collected at
  least as many tests as tests/SUITE_SIZE records.
- Tiers (pytest.ini): a test outside ``slow`` may not start a process or run
  a Runner's loop; trying fails the test with the marker to add.
- Checkpoints: every ``*.pth`` the tests leave in their temporary folders is
  counted before the folder is deleted; the total is printed at the end, and
  a whole-suite run over ``CHECKPOINT_BUDGET`` fails.
"""
import multiprocessing.util
import os
import os.path as osp
import shutil
import subprocess
import sys

import pytest

from helpers import (
    REPO,
    SUITE_SIZE_FILE,
    default_scope_guard,
    generate_shapes,
    run_tools,
)

# Scripts the tests launch (tools/dist_train.sh, ...) run the interpreter that
# runs the tests, not whatever `python` comes first on PATH.
os.environ['PYTHON'] = sys.executable
# The suite never downloads: a model that wants a file from the Hugging Face
# hub (the peers' GLIP and Grounding DINO text encoders) fails at once with
# the hub's own error instead of retrying for half a minute per model.
os.environ.setdefault('HF_HUB_OFFLINE', '1')

SEG_DEMO_CONFIG = osp.join(REPO, 'configs', 'demo',
                           'upernet_swin-t_shapes-ade.py')

# Checkpoint bytes one run of the whole suite may leave in its folders: a
# guard against growth at about the measured total (docs/testing.md
# #checkpoints-written); the aim is 2 GiB.
CHECKPOINT_BUDGET = 20 * 1024**3
_checkpoint_bytes = {}  # test or module node id -> bytes of *.pth written


def pytest_addoption(parser):
    parser.addoption(
        '--whole-suite', action='store_true',
        help='stop unless the collection holds at least as many tests as '
        'tests/SUITE_SIZE records (a test module that failed to import or '
        'was skipped whole would otherwise go unnoticed), and fail the run '
        'if its tests wrote more checkpoint bytes than conftest.py allows')


def pytest_configure(config):
    if hasattr(config, 'workerinput'):  # a pytest-xdist worker
        # one intra-op thread per worker: `make test` runs one worker per
        # core, and two busy threads per core run a batch-1 model ~10x
        # slower than one
        import torch
        torch.set_num_threads(1)


# Test modules whose tests share an expensive module- or session-scoped
# fixture (a training run, a model built from a big config, checkpoints
# written in every layout) run on one pytest-xdist worker, so the fixture
# is built once (`--dist loadgroup` in the Makefile); every other test goes
# to whichever worker is free. Modules naming the same group share a
# session fixture (seg_demo_run).
XDIST_GROUPS = {
    'test_classification': 'classification',
    'test_distributed': 'distributed',
    'test_faults': 'faults',
    'test_htcpp': 'htcpp',
    'test_release_checkpoints': 'release-checkpoints',
    'test_release_segmentors': 'release-segmentors',
    'test_swin_ablations': 'swin-ablations',
    'test_swin_checkpoints': 'swin-checkpoints',
    'test_tools': 'seg-demo',
    'test_user_tools': 'seg-demo',
}


def pytest_itemcollected(item):
    # marks added here exist before any pytest_collection_modifyitems,
    # among them xdist's, which reads the groups
    if item.get_closest_marker('dist') and \
            not item.get_closest_marker('slow'):
        raise pytest.UsageError(
            f'{item.nodeid} is marked dist but not slow: every test '
            'that starts several processes is slow (pytest.ini)')
    group = XDIST_GROUPS.get(item.module.__name__)
    if group:
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session):
    # under pytest-xdist the controller checks the workers' collection
    # (a pytest that a test starts inherits PYTEST_XDIST_WORKER: the worker
    # is known by its workerinput, not by the environment)
    if session.config.getoption('whole_suite') and \
            not hasattr(session.config, 'workerinput'):
        _check_suite_size(session.config, len(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    config = node.config
    if config.getvalue('dist') == 'loadgroup':
        ungrouped = [i for i in ids if '@' not in i and osp.splitext(
            osp.basename(i.split('::')[0]))[0] in XDIST_GROUPS]
        if ungrouped:
            pytest.exit(
                f'pytest-xdist did not apply the group of {ungrouped[0]}: with '
                'this pytest/pytest-xdist pair --dist loadgroup would run a '
                "group's shared fixtures once per worker (see the pytest pin "
                'in requirements/tests.txt)', returncode=3)
    if config.getoption('whole_suite') and \
            not getattr(config, '_mmvisattn_size_checked', False):
        config._mmvisattn_size_checked = True
        _check_suite_size(config, len(ids))


def _check_suite_size(config, collected):
    with open(SUITE_SIZE_FILE) as f:
        expected = int(f.read().split()[0])
    if collected < expected:
        pytest.exit(
            f'collected {collected} tests but the suite holds {expected} '
            f'({osp.relpath(SUITE_SIZE_FILE, REPO)}): a test module failed '
            'to import or was skipped whole. Look for errors or skips above; '
            'lower the number only when tests were removed on purpose.',
            returncode=2)
    if collected > expected:
        config.get_terminal_writer().line(
            f'whole suite: {collected} tests collected, '
            f'{osp.relpath(SUITE_SIZE_FILE, REPO)} says {expected}: '
            f'write {collected} there so that losing them is noticed.',
            yellow=True)


# ------------------------------------------------------------------- tiers
def _refuse(item, what):
    def refuse(*args, **kwargs):
        pytest.fail(
            f'{item.nodeid} {what} but is not marked slow: add '
            '@pytest.mark.slow (and dist for several processes), see the '
            'markers in pytest.ini and docs/testing.md', pytrace=False)
    return refuse


def _fast_tier_guards(item):
    """(owner, name, replacement) for what a fast-tier test may not do:
    start a process (subprocess; multiprocessing's spawn and forkserver
    start through spawnv_passfds, its fork through os.fork) or run a
    Runner's train/val/test loop."""
    from mmengine.runner import Runner
    guards = [(subprocess.Popen, '_execute_child',
               _refuse(item, 'starts a process')),
              (multiprocessing.util, 'spawnv_passfds',
               _refuse(item, 'starts a process')),
              (os, 'fork', _refuse(item, 'forks a process'))]
    guards += [(Runner, loop, _refuse(item, f'runs Runner.{loop}()'))
               for loop in ('train', 'val', 'test')]
    return guards


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    # setup too: a module-scoped fixture that trains is set up by the
    # first test that asks for it
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _guarded(item):
        return (yield)


class _guarded:

    def __init__(self, item):
        self.saved = []
        if item.get_closest_marker('slow') is None:
            self.guards = _fast_tier_guards(item)
        else:
            self.guards = []

    def __enter__(self):
        for owner, name, replacement in self.guards:
            self.saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, replacement)

    def __exit__(self, *exc):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()


# ---------------------------------------------------- folders and checkpoints
def _pth_bytes(folder):
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            if name.endswith('.pth'):
                try:
                    total += os.stat(osp.join(root, name)).st_size
                except OSError:
                    pass
    return total


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.module._mmvisattn_failed = True
    return report


@pytest.fixture(autouse=True)
def _count_test_checkpoints(request):
    """Counts the checkpoints a test left in its tmp_path; set up after
    tmp_path (it asks for it), so torn down before pytest deletes it."""
    if 'tmp_path' not in request.fixturenames:
        yield
        return
    folder = request.getfixturevalue('tmp_path')
    yield
    written = _pth_bytes(folder)
    if written:
        _checkpoint_bytes[request.node.nodeid] = written


@pytest.fixture(scope='module', autouse=True)
def _delete_module_tmp_folders(request, tmp_path_factory):
    """Delete the folders a module's fixtures made with tmp_path_factory
    once the module is done, unless one of its tests failed (pytest.ini does
    the same for each passed test's tmp_path). Their checkpoints are counted
    first. Autouse fixtures are set up first and torn down last, so the
    module's own fixtures have finished by then."""
    base = tmp_path_factory.getbasetemp()
    before = set(os.listdir(base))
    yield
    new = [osp.join(base, name) for name in set(os.listdir(base)) - before
           if not name.startswith(SESSION_PREFIX)]
    # function tmp_paths in there were counted by _count_test_checkpoints
    written = sum(_pth_bytes(p) for p in new
                  if not osp.basename(p).startswith('test_'))
    if written:
        _checkpoint_bytes[request.node.nodeid] = written
    if getattr(request.module, '_mmvisattn_failed', False):
        return
    for path in new:
        shutil.rmtree(path, ignore_errors=True)


def _disk_bytes_written():
    """Bytes this process and the children it has reaped sent to the disk
    (Linux /proc/self/io write_bytes), every file, not only checkpoints."""
    try:
        with open('/proc/self/io') as f:
            return next(int(line.split()[1]) for line in f
                        if line.startswith('write_bytes:'))
    except (OSError, StopIteration, ValueError):
        return 0


_disk_written = {}  # process (controller or xdist worker) -> write_bytes


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist: a worker's counts reach the controller."""
    out = getattr(node, 'workeroutput', {})
    _checkpoint_bytes.update(out.get('mmvisattn_checkpoint_bytes', {}))
    _disk_written[node.gateway.id] = out.get('mmvisattn_disk_written', 0)


_peer_zoo = {}  # (peer, config) -> (outcome, detail): tests/test_peer_zoo.py


def pytest_runtest_logreport(report):
    """The peer zoo's outcomes, from the test's report (xdist sends it with
    its user properties to the controller)."""
    for name, value in report.user_properties:
        if name == 'peer_zoo':
            for package, config, outcome, detail in value:
                _peer_zoo[package, config] = (outcome, detail)


def _write_peer_zoo(write):
    """Per peer, how many of its configs had each outcome; the reasons the
    peers could not build, and anything different, one line each."""
    if not _peer_zoo:
        return
    write('peer zoo: configs per outcome (tests/test_peer_zoo.py)')
    for package in sorted({p for p, _ in _peer_zoo}):
        outcomes = [o for (p, _), (o, _) in _peer_zoo.items() if p == package]
        counts = ', '.join(f'{outcomes.count(o)} {o}'
                           for o in sorted(set(outcomes)))
        write(f'  {package}: {len(outcomes)} configs: {counts}')
    reasons = {}
    for (package, config), (outcome, detail) in sorted(_peer_zoo.items()):
        if outcome != 'same':
            reasons.setdefault((outcome, detail), []).append(
                f'{package}:{config}')
    for (outcome, detail), configs in sorted(reasons.items()):
        write(f'  {outcome} ({len(configs)}): {detail} [{configs[0]}'
              + (f' and {len(configs) - 1} more]' if len(configs) > 1
                 else ']'))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    total = sum(_checkpoint_bytes.values())
    write = terminalreporter.write_line
    _write_peer_zoo(write)
    write(f'checkpoints written by this run: {total / 1024**3:.2f} GiB in '
          f'{len(_checkpoint_bytes)} tests/modules (budget '
          f'{CHECKPOINT_BUDGET / 1024**3:.0f} GiB for the whole suite)')
    for nodeid, size in sorted(_checkpoint_bytes.items(),
                               key=lambda kv: -kv[1])[:5]:
        write(f'  {size / 1024**2:8.0f} MiB  {nodeid}')
    _disk_written['main'] = _disk_bytes_written()
    write('all files written to disk by the tests and the processes they '
          f'started: {sum(_disk_written.values()) / 1024**3:.2f} GiB')


def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, 'workeroutput', None)
    if workeroutput is not None:  # an xdist worker: report to the controller
        workeroutput['mmvisattn_checkpoint_bytes'] = dict(_checkpoint_bytes)
        workeroutput['mmvisattn_disk_written'] = _disk_bytes_written()
        return
    total = sum(_checkpoint_bytes.values())
    if session.config.getoption('whole_suite') and total > CHECKPOINT_BUDGET \
            and exitstatus == 0:
        session.config.get_terminal_writer().line(
            f'the suite wrote {total / 1024**3:.2f} GiB of checkpoints, over '
            f'its {CHECKPOINT_BUDGET / 1024**3:.0f} GiB budget '
            '(tests/conftest.py CHECKPOINT_BUDGET): save smaller models or '
            'drop the optimizer state (checkpoint=dict(save_optimizer=False))',
            red=True)
        session.exitstatus = 1


# ------------------------------------------------ runs several modules read
SESSION_PREFIX = 'session-'  # folders kept until the whole run ends


@pytest.fixture(scope='session', autouse=True)
def _delete_session_tmp_folders(request, tmp_path_factory):
    yield
    base = tmp_path_factory.getbasetemp()
    names = [n for n in os.listdir(base) if n.startswith(SESSION_PREFIX)]
    written = sum(_pth_bytes(osp.join(base, n)) for n in names)
    if written:
        _checkpoint_bytes['session fixtures'] = written
    if request.session.testsfailed:
        return
    for name in names:
        shutil.rmtree(osp.join(base, name), ignore_errors=True)


@pytest.fixture(scope='session')
def seg_demo_run(tmp_path_factory):
    """The demo UperNet (configs/demo/upernet_swin-t_shapes-ade.py) trained 2
    iterations on 64x64 shapes by tools/train.py, then its checkpoint
    evaluated by tools/test.py, in one work dir: the run that
    tests/test_tools.py (the tools dispatch on an mmseg config) and
    tests/test_user_tools.py (log analysis, the image demo) read."""
    root = str(tmp_path_factory.mktemp(SESSION_PREFIX + 'seg-demo'))
    shapes = generate_shapes(osp.join(root, 'shapes'), num_train=8,
                             num_val=2, size=(64, 64))
    work = osp.join(root, 'work')
    options = [
        '--cfg-options', f'train_dataloader.dataset.data_root={shapes}/ade/',
        f'test_dataloader.dataset.data_root={shapes}/ade/',
        'train_cfg.max_iters=2', 'default_hooks.logger.interval=1',
        'default_hooks.checkpoint.interval=2',
        'default_hooks.checkpoint.save_optimizer=False',
        'param_scheduler.0.end=1', 'param_scheduler.1.begin=1',
        'param_scheduler.1.end=2'
    ]
    ckpt = osp.join(work, 'iter_2.pth')
    train, test = run_tools(
        ['tools/train.py', SEG_DEMO_CONFIG, '--work-dir', work, *options],
        ['tools/test.py', SEG_DEMO_CONFIG, ckpt, '--work-dir', work,
         *options])
    return dict(config=SEG_DEMO_CONFIG, shapes=shapes, work=work, ckpt=ckpt,
                train_out=train, test_out=test)


@pytest.fixture(autouse=True)
def _restore_default_scope():
    with default_scope_guard():
        yield
