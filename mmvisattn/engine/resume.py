"""Resuming after a kill: where a checkpoint is written until it is
complete, and which checkpoint of a work dir to resume from (the newest
complete one; half-written leftovers found and removed)."""
import glob
import os
import os.path as osp
import re
from typing import List, Optional, Tuple

from mmengine.logging import print_log

from mmvisattn.checkpoint import checkpoint_damage

PARTIAL_SUFFIX = '.partial'


def partial_path(path: str) -> str:
    """Where a checkpoint is written before it is complete (hidden name)."""
    folder, name = osp.split(path)
    return osp.join(folder, f'.{name}{PARTIAL_SUFFIX}')


def _step(path: str) -> int:
    match = re.search(r'(\d+)\.pth$', path)
    return int(match.group(1)) if match else -1


def latest_complete_checkpoint(
        work_dir: str) -> Tuple[Optional[str], List[str]]:
    """The checkpoint to resume from and any half-written leftovers.

    Prefers the file named in ``last_checkpoint``; when that is missing,
    empty or damaged, the newest ``iter_*.pth`` / ``epoch_*.pth`` that is
    complete. Returns ``(path or None, partial files found)``.
    """
    partials = sorted(glob.glob(osp.join(work_dir, f'.*{PARTIAL_SUFFIX}')))
    candidates = []
    pointer = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(pointer):
        with open(pointer) as f:
            named = f.read().strip()
        if named:
            candidates.append(named)
    found = glob.glob(osp.join(work_dir, 'iter_*.pth')) + \
        glob.glob(osp.join(work_dir, 'epoch_*.pth'))
    candidates += sorted(found, key=_step, reverse=True)
    for path in candidates:
        damage = checkpoint_damage(path)
        if damage is None:
            return path, partials
        print_log(f'resume: skipping {path} ({damage})', logger='current')
    return None, partials


def remove_partials(partials: List[str]) -> None:
    for path in partials:
        print_log(
            f'resume: removing {path}, a checkpoint whose write was '
            'interrupted', logger='current')
        try:
            os.remove(path)
        except FileNotFoundError:  # another rank was first
            pass
