"""The repository is ruff-clean under its own configuration (ruff.toml:
pyflakes, pycodestyle errors and warnings, import order), and vulture finds
no dead code at the confidence stated below."""
import shutil
import subprocess
import sys

import pytest

from helpers import REPO


def _ruff():
    found = shutil.which('ruff')
    if found:
        return [found]
    pytest.importorskip('ruff', reason='ruff is installed by '
                        'requirements/tests.txt (make test)')
    return [sys.executable, '-m', 'ruff']


@pytest.mark.slow  # starts a process (pytest.ini)
def test_ruff_is_clean():
    run = subprocess.run([*_ruff(), 'check', '.'], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


# Dead code: vulture at this confidence (100% flags unused imports,
# variables and unreachable code; 60% would add every function no code
# calls, registry-built classes and hook methods among them). Each name it
# may ignore, and why.
VULTURE_CONFIDENCE = 80
VULTURE_IGNORES = {
    # torch's __torch_function__(func, types, args, kwargs) protocol
    'types': 'mmvisattn/analysis/complexity.py',
    # DistributedDataParallel's keyword; CPU modules take no device ids
    'device_ids': 'mmvisattn/engine/cpu_distributed.py',
    # mmengine's DefaultOptimWrapperConstructor.add_params signature
    'is_dcn_module': 'mmvisattn/engine/optim_constructor.py',
}


@pytest.mark.slow  # starts a process (pytest.ini)
def test_vulture_finds_no_dead_code():
    found = shutil.which('vulture')
    command = [found] if found else [sys.executable, '-m', 'vulture']
    run = subprocess.run(
        [*command, 'mmvisattn', 'tools', 'dev', 'demo',
         f'--min-confidence={VULTURE_CONFIDENCE}',
         f'--ignore-names={",".join(VULTURE_IGNORES)}'],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
