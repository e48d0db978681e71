"""Importing mmvisattn, and building its models, changes nothing of torch,
mmengine, mmcv, mmdet, mmseg or mmpretrain: the identity of every function,
class and class attribute of their loaded modules is recorded before and
after (their methods and descriptors too), with torch's safe-load
allow-list and mmengine's ``MODULE2PACKAGE``, in a fresh interpreter. What
the tools need is entered in a scope (``mmvisattn.runtime()``,
``mmvisattn/environment.py``), and everything is as before after it."""
import json
import subprocess
import sys

import pytest

from helpers import REPO

RECORD = r'''
import importlib, inspect, json, sys
PACKAGES = ('torch', 'mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain')
for name in ('mmengine.config', 'mmengine.model', 'mmengine.optim',
             'mmengine.registry', 'mmengine.runner', 'mmcv.cnn', 'mmcv.ops',
             'mmdet.datasets', 'mmdet.evaluation', 'mmdet.models',
             'mmseg.datasets', 'mmseg.evaluation', 'mmseg.models',
             'mmpretrain.datasets', 'mmpretrain.evaluation',
             'mmpretrain.models'):
    importlib.import_module(name)


def identities():
    found = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.split('.')[0] not in PACKAGES:
            continue
        for name, value in list(vars(module).items()):
            if not (inspect.isfunction(value) or inspect.isclass(value)):
                continue
            found[f'{module_name}.{name}'] = id(value)
            if inspect.isclass(value) and value.__module__ == module_name:
                # its methods and descriptors (its data, e.g. a registry
                # of instances, changes as any program runs)
                for attr, member in list(vars(value).items()):
                    if inspect.isfunction(member) or inspect.isclass(
                            member) or isinstance(
                                member, (classmethod, staticmethod,
                                         property)):
                        found[f'{module_name}.{name}.{attr}'] = id(member)
    from mmengine.config.utils import MODULE2PACKAGE
    import torch.serialization
    found['torch.serialization.get_safe_globals()'] = repr(sorted(
        map(repr, torch.serialization.get_safe_globals())))
    found['mmengine.config.utils.MODULE2PACKAGE'] = repr(
        sorted(MODULE2PACKAGE.items()))
    return found


before = identities()
import mmvisattn  # noqa: E402
import mmvisattn.datasets.transforms  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.registry import MODELS, DefaultScope  # noqa: E402
from mmvisattn.models.backbones import (TNT, RSWAttTransformer,  # noqa: E402
                                        RSWAttViT, SwinTransformer)
for backbone in (SwinTransformer, TNT, RSWAttTransformer, RSWAttViT):
    backbone().init_weights()
for config in sys.argv[1:]:
    cfg = Config.fromfile(config)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        MODELS.build(cfg.model).init_weights()
after_import = identities()
with mmvisattn.runtime():
    inside = identities()
    Config.fromfile(sys.argv[1])
after_scope = identities()
print(json.dumps([
    sorted(k for k in before if before[k] != after_import.get(k)),
    sorted(k for k in before if before[k] != inside.get(k)),
    sorted(k for k in before if before[k] != after_scope.get(k))]))
'''


@pytest.mark.slow
def test_import_and_build_change_no_other_library():
    configs = ['configs/demo/cascade-mask-rcnn_swin-t_shapes.py',
               'configs/demo/upernet_swin-t_shapes-ade.py',
               'configs/swin/swin-t-p4-w7_16xb64_300e_in1k.py']
    run = subprocess.run([sys.executable, '-c', RECORD, *configs], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    after_import, inside, after_scope = json.loads(
        run.stdout.strip().splitlines()[-1])
    assert after_import == [], after_import
    # the check sees the scope's changes (the config lookup only for an
    # editable install, mmvisattn/environment.py), then nothing
    assert {'mmengine.config.utils.MODULE2PACKAGE',
            'torch.serialization.get_safe_globals()'} <= set(inside) <= {
                'mmengine.config.utils.MODULE2PACKAGE',
                'torch.serialization.get_safe_globals()',
                'mmengine.config.config.get_installed_path'}, inside
    assert after_scope == [], after_scope
