"""README.md, docs/ and the folders' READMEs name only what exists: every
relative link, every repository path in backticks (``tools/train.py``,
``mmvisattn/ops/windows.py``), every ``python <script>`` of a command and
every dotted name of ours (``mmvisattn.ops.window_attention``, or a
registered ``mmvisattn.SwinTransformer``) resolves in this checkout; a path
may also be relative to its page. Another repository's path is written
with that repository's name first (``mmdeploy/tools/deploy.py``). A
renamed file or function fails here, not in a reader's shell."""
import glob
import importlib
import os.path as osp
import re

import pytest

from helpers import REPO

PAGES = sorted(
    [osp.join(REPO, 'README.md')] +
    glob.glob(osp.join(REPO, 'docs', '*.md')) +
    glob.glob(osp.join(REPO, 'configs', '*', 'README.md')) +
    glob.glob(osp.join(REPO, 'demo', '**', 'README.md'), recursive=True))

TOP = ('mmvisattn', 'tools', 'tests', 'configs', 'docs', 'demo',
       'requirements', 'dev', '.ci')
LINK = re.compile(r'\]\(([^)\s]+)\)')
CODE = re.compile(r'`([^`\n]+)`')
PATH = re.compile(r'^(?:\.\./)*((?:%s)/[\w./+-]*)$' % '|'.join(
    re.escape(t) for t in TOP))
SCRIPT = re.compile(r'(?:^|\s)python3? (?:-m \S+ )?((?:%s)/[\w./+-]+\.py)'
                    % '|'.join(re.escape(t) for t in TOP))
DOTTED = re.compile(r'^(mmvisattn(?:\.\w+)+)(?:\(.*\))?$')


def registered(name):
    """Whether ``name`` is registered in a registry of the ``mmvisattn``
    scope: a config's ``type='mmvisattn.<name>'``."""
    from mmengine.registry import Registry

    import mmvisattn.datasets.transforms
    import mmvisattn.registry
    return any(isinstance(registry, Registry) and registry.get(name)
               for module in (mmvisattn.registry,
                              mmvisattn.datasets.transforms)
               for registry in vars(module).values())


def resolves(dotted):
    """Whether ``mmvisattn.a.b.c`` is a module, an attribute reached from
    the longest importable module prefix, or (``mmvisattn.Name``) a name
    our registries build."""
    parts = dotted.split('.')
    if len(parts) == 2 and registered(parts[1]):
        return True
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def broken_references(text, page):
    """(line number, reference, why) of what ``text`` (the markdown of
    ``page``) names and this checkout lacks."""
    found = []
    folder = osp.dirname(page)
    for number, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            target = target.split('#')[0]
            if not target or re.match(r'^[a-z]+:', target):
                continue  # an anchor on this page, or a URL
            if not osp.exists(osp.join(folder, target)):
                found.append((number, target, 'link to a missing file'))
        for code in CODE.findall(line):
            code = code.strip()
            path = PATH.match(code)
            if path and not re.search(r'[*<>{}]|\.\.\.', code) and \
                    not osp.exists(osp.join(REPO, path.group(1))) and \
                    not osp.exists(osp.join(folder, code)):
                found.append((number, code, 'no such path'))
            dotted = DOTTED.match(code)
            if dotted and not resolves(dotted.group(1)):
                found.append((number, code, 'no such module or name'))
        for script in SCRIPT.findall(line):
            if not osp.isfile(osp.join(REPO, script)):
                found.append((number, script, 'no such script'))
    return found


@pytest.mark.parametrize('page', PAGES,
                         ids=[osp.relpath(p, REPO) for p in PAGES])
def test_every_reference_resolves(page):
    with open(page) as f:
        broken = broken_references(f.read(), page)
    assert not broken, '\n'.join(
        f'{osp.relpath(page, REPO)}:{n}: {ref} ({why})'
        for n, ref, why in broken)


def test_a_broken_reference_is_named():
    page = osp.join(REPO, 'docs', 'page.md')
    text = '\n'.join([
        'See [training](training.md) and [gone](missing.md#top).',
        'Run `python tools/train.py` or `tools/no_such_tool.py`.',
        '```shell', 'python tools/analysis_tools/no_such.py cfg.py', '```',
        'The kernel is `mmvisattn.ops.window_attention`; '
        '`mmvisattn.ops.no_such_kernel` is not.',
    ])
    assert broken_references(text, page) == [
        (1, 'missing.md', 'link to a missing file'),
        (2, 'tools/no_such_tool.py', 'no such path'),
        (4, 'tools/analysis_tools/no_such.py', 'no such script'),
        (6, 'mmvisattn.ops.no_such_kernel', 'no such module or name'),
    ]
