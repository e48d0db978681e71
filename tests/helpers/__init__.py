"""What the tests share: paths, the shared datasets, the tools run as a user
runs them, and small builders. Test files import from here (``from helpers
import REPO, run_tools``), never from one another or from conftest.py, which
holds only pytest's hooks and fixtures."""
import contextlib
import functools
import importlib.util
import json
import math
import os
import os.path as osp
import subprocess
import sys
import uuid
from typing import NamedTuple

import pytest
from mmengine.config import ConfigDict

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
HELPERS = osp.join(REPO, 'tests', 'helpers')
SHARED_DATA = os.environ.get('MMVISATTN_SHARED_DATA',
                             osp.join(REPO, '..', 'shared', 'data'))
# How many tests the whole suite holds; `make test` passes --whole-suite.
SUITE_SIZE_FILE = osp.join(REPO, 'tests', 'SUITE_SIZE')


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



# torch.nn.init's in-place initialisers, which every layer's constructor
# calls (nn.Linear/Conv reset_parameters)
_INITIALISERS = ('uniform_', 'normal_', 'trunc_normal_', 'constant_', 'ones_',
                 'zeros_', 'xavier_uniform_', 'xavier_normal_',
                 'kaiming_uniform_', 'kaiming_normal_', 'orthogonal_')


def randomise(model, seed=0):
    """``model`` with weights that have no special values (peers start
    position tables at zero), norm scales around 1; returned."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 1. if p.dim() == 1 and name.endswith('weight') else 0.
            p.copy_(torch.randn(p.shape, generator=g) * 0.05 + scale)
    return model


@contextlib.contextmanager
def skip_weight_init():
    """Build models without drawing their initial weights (the parameters
    hold whatever memory they got): for checks that read only names, shapes,
    groups and flags, this makes building the 280M-parameter configs ~5x
    faster. Never for a model that runs."""
    import torch.nn.init as init
    saved = {name: getattr(init, name) for name in _INITIALISERS}
    try:
        for name in _INITIALISERS:
            setattr(init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, fn in saved.items():
            setattr(init, name, fn)


def sampled(values, fast, ids=None):
    """``values`` as ``pytest.param``s for a parametrised check: those for
    which ``fast(value)`` is true run in the fast tier, the rest are marked
    ``slow`` (the whole suite checks every one; docs/testing.md)."""
    ids = list(ids) if ids is not None else [None] * len(values)
    return [pytest.param(*(v if isinstance(v, tuple) else (v, )), id=i,
                         marks=() if fast(v) else pytest.mark.slow)
            for v, i in zip(values, ids)]


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


def load_converter(name, monkeypatch):
    """``tools/model_converters/<name>.py`` as a module, its folder on
    sys.path as when it runs, to call its ``main(argv)`` in-process."""
    folder = osp.join(REPO, 'tools', 'model_converters')
    monkeypatch.syspath_prepend(folder)
    spec = importlib.util.spec_from_file_location(
        name, osp.join(folder, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def convert_with(script, *args):
    """Run ``tools/model_converters/<script>`` with ``args``; return its
    output (the test fails with it if the script does)."""
    proc = subprocess.run(
        [sys.executable, osp.join(REPO, 'tools', 'model_converters', script),
         *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


class LossStep(NamedTuple):
    losses: dict  # name -> value of every logged loss
    moved: set  # names of the trainable parameters the step changed
    model: object  # the model after the step


def runner_loss_step(config, work_dir, moves=()):
    """One training step on what mmengine's Runner builds from ``config``,
    as tools/train.py builds it (its config preparation, the config's own
    model, optimizer wrapper and train dataloader): the model initialised,
    then ``train_step`` on the first real batch. Returns the logged losses
    and the names of the trainable parameters that the step moved.

    The configs that do not train end to end through the tools (one per
    model family does) are checked this way: their data path, model and
    optimizer as built, without a second process, checkpoints or
    evaluation."""
    import torch
    from mmengine.config import Config
    from mmengine.runner import Runner

    from mmvisattn.cli import prepare_config
    cfg = prepare_config(Config.fromfile(str(config)),
                                     str(config), str(work_dir))
    if cfg.get('visualizer'):
        # the visualizer is a named global instance ('visualizer' in the
        # peers' runtimes): a second Runner in this process would reuse the
        # first one's, writing into a deleted work dir (pytest reuses
        # tmp_path names once a passed test's folder is gone)
        cfg.visualizer.name = f'loss-step-{uuid.uuid4().hex}'
    # the registry scopes the Runner sets go when the step is done, also
    # when a module-scoped fixture calls this
    with default_scope_guard():
        runner = Runner.from_cfg(cfg)
        model = runner.model
        model.init_weights()
        optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
        batch = next(iter(runner.train_loop.dataloader))
        model.train()
        before = {name: p.detach().clone()
                  for name, p in model.named_parameters() if p.requires_grad}
        log_vars = model.train_step(batch, optim_wrapper)
    moved = {name for name, p in model.named_parameters()
             if name in before and not torch.equal(p.detach(), before[name])}
    losses = {k: float(v) for k, v in log_vars.items() if 'loss' in k}
    assert losses and all(math.isfinite(v) for v in losses.values()), losses
    for prefix in moves:
        assert any(n.startswith(prefix) for n in moved), \
            f'no parameter under {prefix} changed: {sorted(moved)[:5]}'
    return LossStep(losses, moved, model)
