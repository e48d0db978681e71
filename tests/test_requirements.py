"""What a fresh machine needs is declared, installed, and used by the
commands that a user runs: every import of the project is in a requirements
file, every requirement is satisfied here, the launch scripts run the
interpreter the user chose, and `make test` refuses a suite that collected
less than it holds."""
import ast
import importlib.metadata
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from helpers import REPO, SUITE_SIZE_FILE, load_tool

# what tools/install.sh runs to decide whether pip has work to do
check_requirements = load_tool(osp.join('tools', 'check_requirements.py'))

REQUIREMENTS = osp.join(REPO, 'requirements')
SCANNED = ('mmvisattn', 'tools', 'dev', 'demo', 'tests')
# requirements/constraints.txt only pins versions; it declares nothing.
NOT_DECLARING = ('constraints.txt', )


def declared_requirements():
    reqs = []
    for name in sorted(os.listdir(REQUIREMENTS)):
        if name.endswith('.txt') and name not in NOT_DECLARING:
            reqs += [(name, Requirement(line))
                     for line in check_requirements.requirement_lines(
                         osp.join(REQUIREMENTS, name))]
    return reqs


def own_modules():
    """Names that resolve to the project itself: the package, and the
    modules and folders of tools/, dev/, demo/ and tests/ (imported beside each
    other, e.g. ``conftest`` or ``_swin_io``)."""
    names = {'mmvisattn'}
    for top in SCANNED[1:]:
        for folder, dirs, files in os.walk(osp.join(REPO, top)):
            names.update(dirs)
            names.update(osp.splitext(f)[0] for f in files
                         if f.endswith('.py'))
    return names


def _literal_module(call):
    """``pytest.importorskip('x')`` / ``importlib.import_module('x')``."""
    func = call.func
    name = getattr(func, 'attr', None) or getattr(func, 'id', None)
    if name in ('importorskip', 'import_module') and call.args and isinstance(
            call.args[0], ast.Constant) and isinstance(call.args[0].value,
                                                       str):
        return call.args[0].value
    return None


def imported_modules():
    """Top-level module name -> files importing it, over every import
    statement (module level or inside functions) of the scanned folders."""
    found = {}
    for top in SCANNED:
        for folder, dirs, files in os.walk(osp.join(REPO, top)):
            dirs[:] = [d for d in dirs if d != '__pycache__']
            for name in files:
                if not name.endswith('.py'):
                    continue
                path = osp.join(folder, name)
                with open(path) as f:
                    tree = ast.parse(f.read(), path)
                for node in ast.walk(tree):
                    modules = []
                    if isinstance(node, ast.Import):
                        modules = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and not node.level:
                        modules = [node.module]
                    elif isinstance(node, ast.Call):
                        modules = [_literal_module(node)]
                    for module in filter(None, modules):
                        found.setdefault(module.split('.')[0], set()).add(
                            osp.relpath(path, REPO))
    return found


def undeclared_imports(found, declared, distributions):
    """[(module, files, why)] for each third-party import that no
    requirements file declares."""
    own = own_modules()
    problems = []
    for module, files in sorted(found.items()):
        if module in sys.stdlib_module_names or module in own:
            continue
        dists = {canonicalize_name(d) for d in distributions.get(module, ())}
        if not dists:
            problems.append((module, sorted(files), 'not installed'))
        elif not dists & declared:
            problems.append((module, sorted(files),
                             f'installed by {sorted(dists)}'))
    return problems


def test_every_import_is_declared_in_a_requirements_file():
    declared = {canonicalize_name(r.name) for _, r in declared_requirements()}
    problems = undeclared_imports(imported_modules(), declared,
                                  importlib.metadata.packages_distributions())
    assert not problems, 'undeclared imports (add them to requirements/):\n' + \
        '\n'.join(f'  {module} ({why}), imported by {", ".join(files)}'
                  for module, files, why in problems)


def test_the_scan_names_an_undeclared_import_and_its_file():
    """The check above can fail: a module imported but declared nowhere is
    reported with the file that imports it."""
    found = {'hypothesis': {'tests/test_bad_input.py'}, 'os': {'x.py'},
             'conftest': {'tests/test_x.py'}, 'torch': {'mmvisattn/a.py'}}
    dists = {'hypothesis': ['hypothesis'], 'torch': ['torch']}
    assert undeclared_imports(found, {'torch', 'pytest'}, dists) == [
        ('hypothesis', ['tests/test_bad_input.py'],
         "installed by ['hypothesis']")
    ]
    assert undeclared_imports({'nope_mod': {'a.py'}}, set(), {}) == [
        ('nope_mod', ['a.py'], 'not installed')]


@pytest.mark.slow
def test_every_declared_requirement_is_installed():
    """What tools/install.sh verifies on every run holds here: each line of
    each requirements file (and each pin of constraints.txt that applies)
    is satisfied by the installed version."""
    files = [osp.join(REQUIREMENTS, name) for name in os.listdir(REQUIREMENTS)
             if name.endswith('.txt') and name not in NOT_DECLARING]
    proc = subprocess.run([sys.executable, check_requirements.__file__,
                           *files], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and not proc.stdout, proc.stdout


@pytest.mark.slow
def test_requirement_check_names_what_is_missing_or_wrong(tmp_path):
    """The check that lets install.sh skip pip can fail, and says why."""
    reqs = tmp_path / 'reqs.txt'
    reqs.write_text('pytest>=1\nno-such-package-mmvisattn\ntorch<1.0\n')
    proc = subprocess.run([sys.executable, check_requirements.__file__,
                           str(reqs)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0] == 'no-such-package-mmvisattn: not installed'
    assert lines[1].startswith('torch<1.0: ') and 'installed' in lines[1]
    assert len(lines) == 2


def test_install_script_verifies_requirements_on_every_run():
    """No fast path exits before the requirements files are checked: the
    pip call over them is unconditional, only torch and the mmcv build sit
    behind import checks."""
    with open(osp.join(REPO, 'tools', 'install.sh')) as f:
        script = f.read()
    body = script.split('for f in requirements/*.txt; do')[0]
    assert 'exit 0' not in body, 'an early exit skips the requirements check'
    assert re.search(r'\nif ! missing "\$\{files\[@\]\}"; then\n', script)


def _stand_in(folder, name, text):
    path = osp.join(folder, name)
    with open(path, 'w') as f:
        f.write('#!/usr/bin/env bash\n' + text)
    os.chmod(path, 0o755)
    return path


@pytest.mark.parametrize('script, args, expected', [
    ('dist_train.sh', ['cfg.py', '2'], '-m torch.distributed.run'),
    ('dist_test.sh', ['cfg.py', 'ckpt.pth', '2'], '-m torch.distributed.run'),
    ('slurm_train.sh', ['part', 'job', 'cfg.py', 'work'], 'tools/train.py'),
    ('slurm_test.sh', ['part', 'job', 'cfg.py', 'ckpt.pth'], 'tools/test.py'),
])
@pytest.mark.slow
def test_launch_scripts_run_the_chosen_interpreter(tmp_path, script, args,
                                                   expected):
    """A bare `python` on PATH is not the interpreter the user chose (the
    README's `make test PYTHON=<venv>/bin/python` with the venv not
    activated): the scripts run $PYTHON."""
    bin_dir = str(tmp_path)
    _stand_in(bin_dir, 'python', 'echo "wrong interpreter: $0" >&2; exit 3\n')
    _stand_in(bin_dir, 'srun', 'while [[ "$1" == -* ]]; do\n'
              '  case "$1" in -p) shift;; esac; shift\ndone\nexec "$@"\n')
    chosen = _stand_in(bin_dir, 'chosen-python', 'echo "chosen: $*"\n')
    env = dict(os.environ, PATH=f'{bin_dir}{os.pathsep}{os.environ["PATH"]}',
               PYTHON=chosen, GPUS='1', GPUS_PER_NODE='0')
    proc = subprocess.run(['bash', osp.join('tools', script), *args],
                          cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'wrong interpreter' not in proc.stderr
    assert 'chosen: ' in proc.stdout and expected in proc.stdout, proc.stdout


@pytest.mark.slow
def test_makefile_hands_its_python_to_the_commands_it_runs():
    """`make test PYTHON=X`: X reaches the environment of the recipes, so
    the launch scripts that the tests start use it too."""
    proc = subprocess.run(
        ['make', '-s', '--no-print-directory', '--eval',
         'show-python: ; @echo "env=$$PYTHON"', 'show-python',
         'PYTHON=/some/venv/bin/python'],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == 'env=/some/venv/bin/python'


@pytest.mark.slow
def test_whole_suite_check_refuses_a_short_collection():
    """`make test` runs pytest with --whole-suite: a collection with fewer
    tests than tests/SUITE_SIZE records (a module that failed to import or
    skipped whole) stops the run with a non-zero exit."""
    proc = subprocess.run(
        [sys.executable, '-m', 'pytest', 'tests/test_requirements.py',
         '--whole-suite', '--collect-only', '-q', '-p', 'no:cacheprovider'],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout
    assert 'the suite holds' in proc.stdout + proc.stderr, proc.stdout
    with open(SUITE_SIZE_FILE) as f:
        assert int(f.read().split()[0]) > 400
