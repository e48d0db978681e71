"""Hooks that let long runs survive faults and report honestly on many ranks.

``tools/train.py`` installs them and prints what it changed (see
:func:`fault_tolerant_training`; off with ``--no-fault-tolerance`` or
``fault_tolerance = False`` in the config); a config used with a plain
mmengine ``Runner`` can list them itself::

    default_hooks = dict(checkpoint=dict(type='mmvisattn.AtomicCheckpointHook'))
    custom_hooks = [dict(type='mmvisattn.RNGStateHook'),
                    dict(type='mmvisattn.FiniteLossHook'),
                    dict(type='mmvisattn.FiniteInputHook'),
                    dict(type='mmvisattn.RankMeanLossHook')]
"""
import math
import os
import os.path as osp
from typing import List, Optional

import torch
from mmengine.config import Config
from mmengine.dist import (
    all_gather_object,
    all_reduce,
    get_rank,
    get_world_size,
    is_main_process,
)
from mmengine.fileio import LocalBackend
from mmengine.hooks import CheckpointHook, Hook
from mmengine.model import is_model_wrapper

from mmvisattn.checkpoint import release_classifier_state_dict
from mmvisattn.environment import safe_checkpoint_loading
from mmvisattn.registry import HOOKS

from .resume import partial_path


def write_text_atomically(path: str, text: str) -> None:
    tmp = partial_path(path)
    with open(tmp, 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync(path: str) -> None:
    with open(path, 'rb') as f:
        os.fsync(f.fileno())


@HOOKS.register_module()
class SafeCheckpointLoadingHook(Hook):
    """Lets torch's weights-only loader (torch>=2.6's default) read full
    mmengine checkpoints while the runner loads weights, for a run under
    any entry point: mmdet's, mmseg's or mmpretrain's own
    ``tools/train.py`` and ``tools/test.py``, ``mim train``, a user's
    script. Without it ``resume``, ``load_from`` and
    ``init_cfg=dict(type='Pretrained')`` fail with "Unsupported global"
    (mmengine pickles numpy arrays and ``HistoryBuffer``).

    It enters :func:`mmvisattn.environment.safe_checkpoint_loading` in
    ``before_run``, before the runner initialises the weights and calls
    ``load_or_resume``, and leaves it when the loop starts (``before_train``,
    ``before_val``, ``before_test``) or at ``after_run``: torch's
    allow-list is then exactly as the hook found it. Only the types
    mmengine's checkpoints hold are allowed, so the loader stays safe.
    Our own tools need no hook (they run in :func:`mmvisattn.runtime`);
    with one, the scopes nest. Name it in a config::

        custom_hooks = [dict(type='mmvisattn.SafeCheckpointLoadingHook')]
    """

    priority = 'VERY_HIGH'

    def __init__(self):
        self._scope = None

    def before_run(self, runner) -> None:
        if self._scope is None:
            self._scope = safe_checkpoint_loading()
            self._scope.__enter__()

    def _leave(self, runner=None) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.__exit__(None, None, None)

    before_train = before_val = before_test = after_run = _leave


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` where a checkpoint only ever exists
    complete.

    Each checkpoint is written under a hidden ``.NAME.partial`` name, flushed
    to disk and renamed (atomic on POSIX); ``last_checkpoint`` is replaced the
    same way; and the oldest checkpoint beyond ``max_keep_ckpts`` is removed
    only after the new one is in place (mmengine removes it first, so a kill
    during the write of the only kept checkpoint would leave none).
    """

    def _save_checkpoint_with_step(self, runner, step, meta):
        if not isinstance(self.file_backend, LocalBackend):
            # object stores have their own atomic puts
            return super()._save_checkpoint_with_step(runner, step, meta)
        ckpt_filename = self.filename_tmpl.format(step)
        final = self.file_backend.join_path(self.out_dir, ckpt_filename)
        partial = partial_path(final)
        runner.save_checkpoint(
            self.out_dir,
            osp.basename(partial),
            self.file_client_args,
            save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler,
            meta=meta,
            by_epoch=self.by_epoch,
            backend_args=self.backend_args,
            **self.args)
        self.last_ckpt = final
        runner.message_hub.update_info('last_ckpt', final)

        stale = None
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids and
                                            self.keep_ckpt_ids[-1] == step):
            if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
                stale = self.keep_ckpt_ids.popleft()
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info('keep_ckpt_ids',
                                           list(self.keep_ckpt_ids))
        if not is_main_process():
            return
        _fsync(partial)
        os.replace(partial, final)
        write_text_atomically(
            osp.join(runner.work_dir, 'last_checkpoint'), final)
        if stale is not None and stale != step:
            old = self.file_backend.join_path(self.out_dir,
                                              self.filename_tmpl.format(stale))
            if self.file_backend.isfile(old):
                self.file_backend.remove(old)


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Saves torch's RNG state (CPU and every CUDA device) in each checkpoint
    and restores it when training resumes from that checkpoint.

    mmengine re-seeds on resume and replays the data loader up to the resumed
    iteration (which reproduces the numpy/python draws of the data
    pipeline), but the model's own torch draws (drop path, dropout, RoI
    sampling) would restart from the seed. The state is restored just before
    the first resumed iteration, after that replay, so a deterministic run
    continues with the losses of an uninterrupted one.

    Every rank's state is saved (gathered into the checkpoint rank 0
    writes) and each rank restores its own: ranks draw differently with
    ``diff_rank_seed=True``, and each GPU's CUDA generator advances with
    its own work. A checkpoint resumed on a different number of processes
    (or written before the states were kept per rank) gives every rank
    rank 0's state, and says so.
    """

    # before the checkpoint hook (VERY_LOW) in the same after_train_iter
    priority = 'LOW'

    def __init__(self):
        self._pending: Optional[dict] = None
        self._pending_iter: Optional[int] = None
        self._gathered: Optional[list] = None

    @staticmethod
    def _local_state() -> dict:
        state = dict(torch=torch.get_rng_state())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state['cuda'] = torch.cuda.get_rng_state_all()
        return state

    @staticmethod
    def _checkpoint_saves(runner, at_epoch_end: bool) -> bool:
        """Whether mmengine's checkpoint hook saves at this iteration (or
        epoch) end, by its own rule."""
        for hook in runner.hooks:
            if isinstance(hook, CheckpointHook) and hook.by_epoch == \
                    at_epoch_end:
                if at_epoch_end:
                    return hook.every_n_epochs(
                        runner, hook.interval, hook.save_begin) or (
                            hook.save_last and hook.is_last_train_epoch(runner))
                return hook.every_n_train_iters(
                    runner, hook.interval, hook.save_begin) or (
                        hook.save_last and hook.is_last_train_iter(runner))
        return False

    def _gather(self, runner, at_epoch_end: bool) -> None:
        # mmengine saves on rank 0 only (``Runner.save_checkpoint`` is
        # master-only), so every rank's state is gathered here, on all
        # ranks, and only where a checkpoint follows: no per-iteration cost
        self._gathered = None
        if get_world_size() > 1 and self._checkpoint_saves(runner,
                                                           at_epoch_end):
            self._gathered = all_gather_object(self._local_state())

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None) -> None:
        self._gather(runner, at_epoch_end=False)

    def after_train_epoch(self, runner) -> None:
        self._gather(runner, at_epoch_end=True)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        local = self._local_state()
        states = self._gathered if get_world_size() > 1 else [local]
        checkpoint['rng_state'] = dict(local)
        if states is not None:  # else (a best-checkpoint save): rank 0's
            checkpoint['rng_state']['per_rank'] = states

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._pending = checkpoint.get('rng_state')
        self._pending_iter = checkpoint.get('meta', {}).get('iter')

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if self._pending is None:
            return
        # only a resume (iteration restored) continues the saved stream;
        # `load_from` fine-tuning starts at iteration 0 with fresh draws
        if runner.iter == self._pending_iter and runner.iter > 0:
            per_rank = self._pending.get('per_rank')
            state = self._pending
            if per_rank is not None and len(per_rank) == get_world_size():
                state = per_rank[get_rank()]
            elif get_world_size() > 1:
                saved = 'one' if per_rank is None else len(per_rank)
                runner.logger.warning(
                    f'RNGStateHook: the checkpoint holds the RNG state of '
                    f'{saved} rank(s), this run has {get_world_size()}: '
                    'every rank continues from rank 0\'s')
            torch.set_rng_state(state['torch'])
            if 'cuda' in state and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state['cuda'])
        self._pending = None


@HOOKS.register_module()
class FiniteLossHook(Hook):
    """Stops training at the first NaN/Inf loss, naming the iteration and the
    loss terms, before a checkpoint of the broken weights is written (the
    checkpoint hook runs later in the same iteration).

    It reads the values that mmengine's ``RuntimeInfoHook`` (priority
    VERY_HIGH, before this one) already moved to the host for the logger, so
    the check adds no device sync and never converts a tensor that requires
    grad.
    """

    priority = 'ABOVE_NORMAL'

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None) -> None:
        if not outputs:
            return
        logged = runner.message_hub.log_scalars
        bad = {}
        for key, value in outputs.items():
            if 'loss' not in key:
                continue
            buffer = logged.get(f'train/{key}')
            value = (buffer.current() if buffer is not None else
                     float(torch.as_tensor(value).detach()))
            if not math.isfinite(value):
                bad[key] = value
        if bad:
            last = runner.message_hub.get_info('last_ckpt')
            raise FloatingPointError(
                f'iteration {runner.iter + 1}: non-finite loss {bad}. '
                f'Last complete checkpoint: {last or "none yet"}. Lower the '
                'learning rate, enable optim_wrapper.clip_grad, or check the '
                'batch (NaN/Inf inputs, degenerate boxes).')


@HOOKS.register_module()
class FiniteInputHook(Hook):
    """Refuses NaN/Inf images before they reach the model, at no device
    cost: each batch is checked on the host, as the data loader delivered
    it (before the data preprocessor moves it to the device; integer
    images, the usual case, cannot hold NaN and are skipped), and the data
    preprocessor's ``std`` is checked once for zeros, which would turn
    every normalised pixel of that channel into Inf/NaN. The backbones
    keep only shape checks in their forward (see ``check_images``)."""

    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) \
            else runner.model
        std = getattr(getattr(model, 'data_preprocessor', None), 'std', None)
        if isinstance(std, torch.Tensor) and not bool((std != 0).all()):
            raise ValueError(
                f'model.data_preprocessor.std has a zero ({std.flatten()}): '
                'normalising would divide by zero')

    def _check(self, data_batch, mode: str, batch_idx: int) -> None:
        inputs = data_batch.get('inputs') if isinstance(data_batch,
                                                        dict) else None
        if isinstance(inputs, torch.Tensor):
            inputs = [inputs]
        for i, img in enumerate(inputs or ()):
            if (isinstance(img, torch.Tensor) and img.is_floating_point()
                    and img.device.type == 'cpu'
                    and not bool(torch.isfinite(img).all())):
                raise ValueError(
                    f'{mode} batch {batch_idx}, image {i} (shape '
                    f'{tuple(img.shape)}) has NaN/Inf pixel values; check '
                    'the image files and the loading pipeline')

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self._check(data_batch, 'train', batch_idx)

    def before_val_iter(self, runner, batch_idx, data_batch=None) -> None:
        self._check(data_batch, 'val', batch_idx)

    def before_test_iter(self, runner, batch_idx, data_batch=None) -> None:
        self._check(data_batch, 'test', batch_idx)


@HOOKS.register_module()
class RankMeanLossHook(Hook):
    """Logs losses averaged over all ranks (mmengine logs rank 0's own), so a
    run on N processes with batch b reports the loss of its global batch N*b.
    Runs before mmengine's RuntimeInfoHook hands the values to the logger."""

    priority = 'HIGHEST'

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None) -> None:
        if not outputs or get_world_size() == 1:
            return
        keys = sorted(outputs)
        values = torch.stack(
            [torch.as_tensor(outputs[k], dtype=torch.float64) for k in keys])
        all_reduce(values, op='mean')
        for key, value in zip(keys, values):
            outputs[key] = value


FAULT_TOLERANCE_HOOKS = ('RNGStateHook', 'FiniteLossHook', 'FiniteInputHook',
                         'RankMeanLossHook')


@HOOKS.register_module()
class ReleaseClassifierHook(Hook):
    """Released classifiers load as whole models: ``load_from``,
    ``tools/test.py CONFIG RELEASE`` and ``Runner.load_checkpoint`` read the
    official Swin (``{'model': ...}``), TNT and timm files as they are.

    mmengine calls ``after_load_checkpoint`` before it loads the weights;
    the file is rewritten there into the classifier's own names by
    :func:`~mmvisattn.checkpoint.release_classifier_state_dict` (backbone
    under ``backbone.``, converted by its load pre-hook; ``head.weight``
    onto ``head.fc.weight``). Every other checkpoint is left as it is. Our
    classification configs list it in ``custom_hooks``.
    """
    priority = 'VERY_HIGH'  # before any hook that reads the weights (EMA)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) \
            else runner.model
        state = release_classifier_state_dict(checkpoint, model)
        if state is None:
            return
        if all(isinstance(v, torch.Tensor) for v in checkpoint.values()):
            checkpoint.clear()  # a bare state dict: replaced whole
        checkpoint.pop('model', None)
        checkpoint['state_dict'] = state
        runner.logger.info(
            'checkpoint read as a released classifier: backbone.* (its layout '
            'converted on load), head.* -> head.fc.*')


def fault_tolerant_training(cfg: Config) -> List[str]:
    """What ``tools/train.py`` adds to a config unless told not to
    (``--no-fault-tolerance`` or ``fault_tolerance = False`` in the config):
    atomic checkpoints, RNG state in checkpoints, a stop on non-finite
    losses, rank-mean logging. Returns one line per change, which the tool
    prints, so nothing is changed silently. mmengine's plain
    ``CheckpointHook`` becomes ``AtomicCheckpointHook`` with the same
    arguments; any other checkpoint hook type is left alone, and hooks the
    config already lists are not added twice."""
    changes = []
    checkpoint = cfg.setdefault('default_hooks', {}).get('checkpoint')
    if checkpoint is not None and checkpoint.get('type') in (
            'CheckpointHook', 'mmengine.CheckpointHook'):
        changes.append(f'default_hooks.checkpoint: {checkpoint["type"]} -> '
                       'mmvisattn.AtomicCheckpointHook (same arguments)')
        checkpoint['type'] = 'mmvisattn.AtomicCheckpointHook'
    changes += [f'custom_hooks: + mmvisattn.{name}'
                for name in add_custom_hooks(cfg, FAULT_TOLERANCE_HOOKS)]
    return changes


def add_custom_hooks(cfg: Config, names) -> List[str]:
    """Append ``mmvisattn.<name>`` to ``cfg.custom_hooks`` for each name
    the config does not list yet (under any scope); returns those added."""
    custom = list(cfg.get('custom_hooks') or [])
    present = {str(h.get('type', '')).split('.')[-1] for h in custom}
    added = [name for name in names if name not in present]
    custom += [dict(type=f'mmvisattn.{name}') for name in added]
    cfg.custom_hooks = custom
    return added
