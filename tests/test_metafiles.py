"""The model index (model-index.yml and the configs/*/metafile.yml it imports,
OpenMMLab's format, read by `mim search`): every zoo config is listed once,
with a config that exists, a unique name, params and FLOPs, and numeric
metrics. YAML only, no model is built (well under a second).

Zoo directories: configs/swin, configs/swin_v2, configs/tnt, configs/rswatt. Not indexed:
configs/demo (small from-scratch runs on the generated shapes data, not zoo
models with a recipe or results), configs/_base_ (fragments), and the
top-level alias configs/cascade_swin_t_coco.py (= the Cascade Swin-T 3x
zoo config, which is indexed).

These checks are generic, for every metafile; what is specific to one zoo
(e.g. each COCO config's epochs against its recipe) stays in that zoo's test
(tests/test_zoo_coco.py, tests/test_zoo_ade.py).
"""
import glob
import numbers
import os.path as osp
import re

import yaml

from helpers import REPO

ZOO_DIRS = ('swin', 'swin/ablations', 'swin_v2', 'tnt', 'rswatt')
MODEL_INDEX = osp.join(REPO, 'model-index.yml')
# "86M", "85.7M", "1043G", "899.7G" (the metafiles' unit convention)
SIZE = re.compile(r'^\d+(\.\d+)?[KMGT]$')


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _imports():
    return _load(MODEL_INDEX)['Import']


def _metafiles():
    """metafile path (relative to the repo) -> its parsed content."""
    return {rel: _load(osp.join(REPO, rel)) for rel in _imports()}


def _entries():
    return [(rel, m) for rel, meta in _metafiles().items()
            for m in meta['Models']]


def _zoo_configs():
    found = set()
    for zoo in ZOO_DIRS:
        for path in glob.glob(osp.join(REPO, 'configs', zoo, '**', '*.py'),
                              recursive=True):
            rel = osp.relpath(path, REPO).replace(osp.sep, '/')
            parts = rel.split('/')
            if '_base_' in parts or '__pycache__' in parts:
                continue
            found.add(rel)
    return found


def test_model_index_imports_every_metafile():
    imports = _imports()
    assert len(imports) == len(set(imports)), imports
    for rel in imports:
        assert osp.isfile(osp.join(REPO, rel)), rel
    on_disk = {
        osp.relpath(p, REPO).replace(osp.sep, '/')
        for p in glob.glob(osp.join(REPO, 'configs', '**', 'metafile.yml'),
                           recursive=True)}
    assert set(imports) == on_disk, set(imports) ^ on_disk
    assert set(imports) == {f'configs/{z}/metafile.yml' for z in ZOO_DIRS}


def test_model_index_ships_in_the_package():
    """mim reads <package>/.mim/model-index.yml and resolves its paths from
    there: in a checkout .mim/ links to the repo's files (setup.py copies
    them into the wheel)."""
    mim = osp.join(REPO, 'mmvisattn', '.mim')
    assert osp.samefile(osp.join(mim, 'model-index.yml'), MODEL_INDEX)
    for rel in _imports():
        assert osp.isfile(osp.join(mim, rel)), rel


def test_every_zoo_config_is_in_exactly_one_entry():
    configs = [m['Config'] for _, m in _entries()]
    duplicated = {c for c in configs if configs.count(c) > 1}
    assert not duplicated, f'listed more than once: {sorted(duplicated)}'
    zoo = _zoo_configs()
    for z in ZOO_DIRS:  # guards the glob itself
        assert any(c.startswith(f'configs/{z}/') for c in zoo), z
    missing = zoo - set(configs)
    assert not missing, f'configs without a metafile entry: {sorted(missing)}'
    stray = set(configs) - zoo
    assert not stray, f'entries for no zoo config: {sorted(stray)}'


def test_entries_are_well_formed():
    names = [m['Name'] for _, m in _entries()]
    assert len(names) == len(set(names)), 'Name must be unique (mim keys on it)'
    for rel, meta in _metafiles().items():
        collections = {c['Name'] for c in meta['Collections']}
        zoo_dir = osp.dirname(rel)
        for m in meta['Models']:
            name, config = m['Name'], m['Config']
            assert osp.isfile(osp.join(REPO, config)), config
            assert osp.dirname(config) == zoo_dir, (rel, config)
            assert name == osp.splitext(osp.basename(config))[0], name
            assert m['In Collection'] in collections, name
            meta_ = m['Metadata']
            for key in ('Parameters', 'FLOPs'):
                assert SIZE.match(str(meta_.get(key))), (name, key)
            assert ('Epochs' in meta_) != ('Iterations' in meta_), name
            assert isinstance(meta_['Batch Size'], int), name
            assert 'Weights' in m, f'{name}: Weights (null if none released)'


def test_results_are_numbers():
    for _, m in _entries():
        results = m['Results']
        # a list, possibly empty: `mim search` iterates it (null breaks it)
        assert isinstance(results, list), m['Name']
        for result in results:
            assert result['Task'] and result['Dataset'], m['Name']
            assert result['Metrics'], m['Name']
            for metric, value in result['Metrics'].items():
                assert isinstance(value, numbers.Real) and not isinstance(
                    value, bool), (m['Name'], metric, value)


def test_modelindex_loads_it():
    """The modelindex package (mim's parser) reads the same index."""
    import modelindex
    index = modelindex.load(MODEL_INDEX)
    assert len(index.models) == len(_entries())
    for model in index.models:
        list(model.results)
