"""Mixed precision through mmengine's optimizer-wrapper machinery, named in
a config or by ``tools/train.py --amp`` (nothing of mmengine's is changed):

- :class:`AmpOptimWrapper` (``type='mmvisattn.AmpOptimWrapper'``) is
  mmengine's, fp16 or bf16 on a GPU, with mmcv's ops in fp32 under bf16;
- :class:`BF16OptimWrapper` is bf16 on any device mmengine's ``autocast``
  supports, the CPU included.

mmengine's ``AmpOptimWrapper`` asserts a CUDA/NPU/MLU device (its loss
scaler is ``torch.cuda.amp.GradScaler``). bf16 keeps fp32's exponent range,
so it needs no loss scaling: this wrapper is mmengine's plain
``OptimWrapper`` whose ``optim_context`` adds mmengine's ``autocast`` in
bf16. ``tools/train.py --amp`` uses it where no GPU is visible, and
``--amp-dtype bfloat16`` could use it anywhere.

bf16 pays on a CPU only where it has bf16 instructions (``avx512_bf16`` or
AMX); elsewhere oneDNN falls back to slow reference kernels: on an
AVX2-only CPU a bf16 Cascade Mask R-CNN step took 60x the fp32 step
(docs/benchmarks.md). The wrapper says so when built on such a CPU.
"""
import logging
from contextlib import contextmanager

import torch
import torch.nn as nn
from mmengine.logging import print_log
from mmengine.optim import AmpOptimWrapper as MMEngineAmpOptimWrapper
from mmengine.optim import OptimWrapper
from mmengine.runner.amp import autocast

from mmvisattn.environment import bf16_scope, mmcv_ops_fp32_under_bf16
from mmvisattn.registry import OPTIM_WRAPPERS


def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bf16 arithmetic (``avx512_bf16`` or AMX), read
    from /proc/cpuinfo (Linux); False where that cannot be read."""
    try:
        with open('/proc/cpuinfo') as f:
            flags = f.read()
    except OSError:
        return False
    return 'avx512_bf16' in flags or 'amx_bf16' in flags


@OPTIM_WRAPPERS.register_module()
class BF16OptimWrapper(OptimWrapper):
    """``OptimWrapper`` that runs the forward under bf16 autocast (weights,
    gradients and optimizer state stay fp32; no loss scaler), with mmcv's
    ops in fp32 inside it, as mmengine's ``AmpOptimWrapper`` in bf16."""

    def __init__(self, *args, dtype='bfloat16', **kwargs):
        if dtype not in ('bfloat16', torch.bfloat16):
            raise ValueError(
                f'BF16OptimWrapper: dtype={dtype!r}; it runs bfloat16 only '
                '(float16 needs a loss scaler: mmengine\'s AmpOptimWrapper, '
                'on a GPU)')
        super().__init__(*args, **kwargs)
        self.cast_dtype = torch.bfloat16  # as AmpOptimWrapper names it
        if not torch.cuda.is_available() and not cpu_has_native_bf16():
            print_log(
                'BF16OptimWrapper: this CPU has no bf16 instructions '
                '(avx512_bf16/amx_bf16): bf16 runs in slow emulation, far '
                'slower than fp32; train without --amp here',
                logger='current', level=logging.WARNING)

    # mmcv's kernels have no bf16 version: inside the forward's autocast and
    # the backward (a checkpointed block recomputes its forward there)
    # they run in fp32 (mmvisattn/environment.py, 3.)
    @contextmanager
    def optim_context(self, model: nn.Module):
        with super().optim_context(model), autocast(dtype=torch.bfloat16), \
                mmcv_ops_fp32_under_bf16():
            yield

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        with mmcv_ops_fp32_under_bf16():
            super().backward(loss, **kwargs)


@OPTIM_WRAPPERS.register_module()
class AmpOptimWrapper(MMEngineAmpOptimWrapper):
    """mmengine's ``AmpOptimWrapper`` (same arguments: ``dtype``,
    ``loss_scale``, ...), with mmcv's ops in fp32 inside its bf16 autocast
    and backward, where mmcv's kernels have no bf16 version ("not
    implemented for 'BFloat16'"). fp16 and fp32 are mmengine's, unchanged.
    ``tools/train.py --amp`` names it on a GPU; a config names it as
    ``optim_wrapper = dict(type='mmvisattn.AmpOptimWrapper', ...)``."""

    @contextmanager
    def optim_context(self, model: nn.Module):
        with super().optim_context(model), bf16_scope(self):
            yield

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        with bf16_scope(self):
            super().backward(loss, **kwargs)
