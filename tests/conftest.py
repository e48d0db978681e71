import contextlib
import functools
import importlib.util
import json
import os
import os.path as osp
import shutil
import subprocess
import sys

import pytest
from mmengine.config import ConfigDict

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
SHARED_DATA = os.environ.get('MMVISATTN_SHARED_DATA',
                             osp.join(REPO, '..', 'shared', 'data'))
# How many tests the whole suite holds; `make test` passes --whole-suite.
SUITE_SIZE_FILE = osp.join(REPO, 'tests', 'SUITE_SIZE')

# Scripts the tests launch (tools/dist_train.sh, ...) run the interpreter that
# runs the tests, not whatever `python` comes first on PATH.
os.environ['PYTHON'] = sys.executable


def pytest_addoption(parser):
    parser.addoption(
        '--whole-suite', action='store_true',
        help='stop unless the collection holds at least as many tests as '
        'tests/SUITE_SIZE records (a test module that failed to import or '
        'was skipped whole would otherwise go unnoticed)')


def pytest_collection_finish(session):
    if not session.config.getoption('whole_suite'):
        return
    with open(SUITE_SIZE_FILE) as f:
        expected = int(f.read().split()[0])
    collected = len(session.items)
    if collected < expected:
        pytest.exit(
            f'collected {collected} tests but the suite holds {expected} '
            f'({osp.relpath(SUITE_SIZE_FILE, REPO)}): a test module failed '
            'to import or was skipped whole. Look for errors or skips above; '
            'lower the number only when tests were removed on purpose.',
            returncode=2)
    if collected > expected:
        session.config.get_terminal_writer().line(
            f'whole suite: {collected} tests collected, '
            f'{osp.relpath(SUITE_SIZE_FILE, REPO)} says {expected}: '
            f'write {collected} there so that losing them is noticed.',
            yellow=True)


def shared_dataset(name):
    """Path of a dataset in ../shared/data, or skip the test with the reason."""
    path = osp.join(SHARED_DATA, name)
    if not osp.isdir(path):
        pytest.skip(f'{path} is absent (set MMVISATTN_SHARED_DATA to the '
                    'folder holding coco128/camvid_ade)')
    return path


@contextlib.contextmanager
def default_scope_guard():
    """Undo registry default scopes created inside (e.g. by mmdet's
    ``register_all_modules()`` or mmseg's ``init_model``), so later tests
    build in their own scope: an mmdet/mmseg scope left behind makes
    mmpretrain's ImageClassifier look up ``ClsDataPreprocessor`` in that
    library's registry. Module-scoped fixtures are set up before the
    autouse fixture below, so they use this themselves."""
    from mmengine.registry import DefaultScope
    before = set(DefaultScope._instance_dict)
    try:
        yield
    finally:
        for name in set(DefaultScope._instance_dict) - before:
            DefaultScope._instance_dict.pop(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.module._mmvisattn_failed = True
    return report


@pytest.fixture(scope='module', autouse=True)
def _delete_module_tmp_folders(request, tmp_path_factory):
    """Delete the folders a module's fixtures made with tmp_path_factory
    once the module is done, unless one of its tests failed. Trained
    checkpoints add up to ~20 GB per suite run otherwise (pytest.ini does the
    same for each passed test's tmp_path). Autouse fixtures are set up first
    and torn down last, so the module's own fixtures have finished by then."""
    base = tmp_path_factory.getbasetemp()
    before = set(os.listdir(base))
    yield
    if getattr(request.module, '_mmvisattn_failed', False):
        return
    for name in set(os.listdir(base)) - before:
        shutil.rmtree(osp.join(base, name), ignore_errors=True)


@pytest.fixture(autouse=True)
def _restore_default_scope():
    with default_scope_guard():
        yield


def load_tool(relpath):
    """A tool script (e.g. ``tools/analysis_tools/get_flops.py``) as a
    module, to call its functions or ``main(argv)`` in-process."""
    name = osp.splitext(osp.basename(relpath))[0]
    spec = importlib.util.spec_from_file_location(f'mmvisattn_tool_{name}',
                                                  osp.join(REPO, relpath))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate_shapes(*args, **kwargs):
    """The project's demo data (tools/make_demo_data.py), for tests."""
    return _demo_data_tool().generate_shapes(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def _demo_data_tool():
    return load_tool(osp.join('tools', 'make_demo_data.py'))


def plain(obj):
    """ConfigDicts -> dicts, recursively, so that repr() is valid Python."""
    if isinstance(obj, ConfigDict):
        obj = obj.to_dict()
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(plain(v) for v in obj)
    return obj


# tools/train.py and then tools/test.py, run as scripts (their argument
# parsing and main()) in one fresh Python process: importing torch, mmdet
# and mmvisattn once instead of twice saves about 15 s per config here.
_TOOL_MARK = '=== zoo test: running '
_TOOL_DRIVER = f"""
import json, runpy, sys
for argv in json.loads(sys.argv[1]):
    sys.argv = argv
    print({_TOOL_MARK!r} + argv[0], flush=True)
    runpy.run_path(argv[0], run_name='__main__')
"""


def run_tools(*commands, python_path=None):
    """Run each [tool, arg, ...] in turn; return each one's output.
    ``python_path``: a folder to import more modules from (a config's
    ``custom_imports`` of a test helper)."""
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    if python_path:
        env['PYTHONPATH'] = os.pathsep.join(
            filter(None, [python_path, env.get('PYTHONPATH')]))
    proc = subprocess.run(
        [sys.executable, '-c', _TOOL_DRIVER, json.dumps(commands)], cwd=REPO,
        env=env, timeout=900, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    outputs = proc.stdout.split(_TOOL_MARK)[1:]
    assert len(outputs) == len(commands), proc.stdout[-3000:]
    return outputs


def convert_with(script, *args):
    """Run ``tools/model_converters/<script>`` with ``args``; return its
    output (the test fails with it if the script does)."""
    proc = subprocess.run(
        [sys.executable, osp.join(REPO, 'tools', 'model_converters', script),
         *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout
