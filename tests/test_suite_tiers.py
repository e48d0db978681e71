"""The suite's own rules (tests/conftest.py, pytest.ini, Makefile): a test
outside the slow tier cannot start a process or run a Runner's loop, a slow
one can, and the Makefile's tiers select what docs/testing.md says."""
import multiprocessing
import os
import re
import subprocess
import sys

import pytest

from helpers import REPO


def test_fast_tier_refuses_a_subprocess():
    with pytest.raises(pytest.fail.Exception, match='is not marked slow'):
        subprocess.run([sys.executable, '-c', 'pass'])


def test_fast_tier_refuses_multiprocessing_and_fork():
    ctx = multiprocessing.get_context('spawn')
    with pytest.raises(pytest.fail.Exception, match='is not marked slow'):
        ctx.Process(target=print).start()
    with pytest.raises(pytest.fail.Exception, match='forks a process'):
        os.fork()


def test_fast_tier_refuses_a_runner_loop():
    from mmengine.runner import Runner
    for loop in ('train', 'val', 'test'):
        with pytest.raises(pytest.fail.Exception,
                           match=rf'runs Runner.{loop}\(\)'):
            getattr(Runner, loop)(None)


@pytest.mark.slow
def test_slow_tier_starts_processes():
    out = subprocess.run([sys.executable, '-c', 'print(6 * 7)'],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '42'


def test_makefile_tiers():
    with open(os.path.join(REPO, 'Makefile')) as f:
        makefile = f.read()
    recipes = dict(re.findall(r'^([\w-]+): install\n((?:\t.+\n?)+)', makefile,
                              re.M))
    recipes = {k: [line.strip() for line in v.splitlines()]
               for k, v in recipes.items()}
    # the fast tier lints first (ruff.toml), then runs the tests
    assert recipes['test-fast'] == ['$(PYTHON) -m ruff check .',
                                    '$(PYTEST) -m "not slow and not gpu"']
    assert recipes['test'] == ['$(PYTEST) --whole-suite -v']
    pytest_line = re.search(r'^PYTEST := (.+)$', makefile, re.M).group(1)
    assert '--durations=30' in pytest_line and '-rs' in pytest_line
    assert '--dist loadgroup' in pytest_line
    with open(os.path.join(REPO, '.ci', 'run')) as f:
        assert f.read().rstrip().endswith('make test')
