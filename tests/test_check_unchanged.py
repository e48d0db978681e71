"""dev/check_unchanged.py: what a refactoring must leave unchanged,
and, where a hash moved, by how much."""
import json
import os.path as osp

import pytest

from helpers import load_tool
from mmvisattn.ops import use_backend

tool = load_tool('dev/check_unchanged.py')

# RSWAtt-n: the smallest config whose fast path packs its linears, so its
# default-path outputs differ from the plain path's by GEMM rounding
CONFIG = 'configs/demo/upernet_rswatt-n_shapes-ade.py'


@pytest.fixture(scope='module')
def rows():
    path = osp.join(tool.ROOT, CONFIG)
    described = {}
    for backend in ('auto', 'plain'):
        with use_backend(backend):
            described[backend] = tool.describe(path)
    return described


def write(tmp_path, name, *rows):
    path = tmp_path / name
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    return str(path)


def test_a_row_samples_every_output_at_the_same_positions(rows):
    auto = rows['auto']
    assert auto['config'] == CONFIG and auto['params'] > 0
    assert len(auto['backbone_samples']) == 4 * tool.SAMPLES  # 4 stages
    again = tool.describe(osp.join(tool.ROOT, CONFIG))
    assert again == auto


def test_rounding_reads_apart_from_a_change(rows, tmp_path, capsys):
    auto, plain = rows['auto'], rows['plain']
    assert auto['backbone_outputs'] != plain['backbone_outputs']
    before = write(tmp_path, 'before.jsonl', plain)
    assert tool.compare(before, write(tmp_path, 'same.jsonl', plain)) == 0
    assert '1 configs in both, 0 changed' in capsys.readouterr().out

    assert tool.compare(before, write(tmp_path, 'after.jsonl', auto)) == 1
    out = capsys.readouterr().out
    move = tool.sample_change(plain, auto)
    assert 0 < move < 1e-5, move
    assert f'1 in the outputs alone, sampled values moved by at most ' \
        f'{move:.1e}' in out

    # a change of the arithmetic: one sampled value off by 1%
    changed = dict(plain, backbone_outputs='0' * 16,
                   backbone_samples=list(plain['backbone_samples']))
    largest = max(map(abs, changed['backbone_samples']))
    changed['backbone_samples'][7] += 0.01 * largest
    tool.compare(before, write(tmp_path, 'changed.jsonl', changed))
    assert 'moved by at most 1.0e-02' in capsys.readouterr().out

    # a parameter count that moved is no rounding: no move is quoted
    grown = dict(auto, params=auto['params'] + 1)
    tool.compare(before, write(tmp_path, 'grown.jsonl', grown))
    out = capsys.readouterr().out
    assert "'params'" in out and 'outputs alone' not in out
