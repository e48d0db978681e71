"""The repository is ruff-clean under its own configuration (ruff.toml:
pyflakes, pycodestyle errors and warnings, import order)."""
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
