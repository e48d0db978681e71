"""Check requirements files against the installed distributions.

    python tools/check_requirements.py requirements/runtime.txt [...]

Prints each requirement that is missing or at a version outside its
specifier (and outside requirements/constraints.txt), and exits 1 if there
is any; exits 0 silently when everything is satisfied. tools/install.sh runs
it before each pip step, so a satisfied environment costs no pip call while a
requirement added to a file is still installed on the next run. Standard
library only, plus ``packaging`` (pip's vendored copy when the package is not
installed).
"""
import importlib.metadata
import os.path as osp
import sys

try:
    from packaging.requirements import Requirement
except ImportError:  # a fresh venv: pip always carries a copy
    from pip._vendor.packaging.requirements import Requirement

CONSTRAINTS = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))),
                       'requirements', 'constraints.txt')


def requirement_lines(path):
    """Requirement strings of one file, following ``-r`` includes."""
    lines = []
    with open(path) as f:
        for raw in f:
            line = raw.split('#')[0].strip()
            if not line:
                continue
            if line.startswith('-r'):
                lines += requirement_lines(
                    osp.join(osp.dirname(path), line[2:].strip()))
            elif not line.startswith('-'):
                lines.append(line)
    return lines


def unsatisfied(requirements):
    """[(requirement, why)] for those the environment does not meet."""
    problems = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append((req, 'not installed'))
            continue
        if req.specifier and not req.specifier.contains(version,
                                                        prereleases=True):
            problems.append((req, f'{version} installed'))
    return problems


def main(paths):
    requirements = [(path, Requirement(line)) for path in paths
                    for line in requirement_lines(path)]
    constrained = {r.name.lower(): r for r in map(
        Requirement, requirement_lines(CONSTRAINTS))}
    problems = unsatisfied([r for _, r in requirements])
    # a pin in constraints.txt applies to every file's requirement of it
    problems += unsatisfied([
        constrained[r.name.lower()] for _, r in requirements
        if r.name.lower() in constrained
    ])
    for line in dict.fromkeys(f'{req}: {why}' for req, why in problems):
        print(line)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
