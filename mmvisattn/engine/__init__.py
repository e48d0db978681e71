from ..checkpoint import CheckpointError, read_checkpoint, verify_checkpoint
from .amp import AmpOptimWrapper, BF16OptimWrapper
from .cpu_distributed import (
                          CPUDistributedDataParallel,
                          CPUSyncBatchNorm,
                          init_cpu_distributed,
)
from .hooks import (
                          AtomicCheckpointHook,
                          FiniteInputHook,
                          FiniteLossHook,
                          RankMeanLossHook,
                          ReleaseClassifierHook,
                          RNGStateHook,
                          SafeCheckpointLoadingHook,
                          fault_tolerant_training,
)
from .optim_constructor import LayerDecayOptimWrapperConstructor, layer_id
from .resume import latest_complete_checkpoint, partial_path, remove_partials

__all__ = [
    'AmpOptimWrapper', 'BF16OptimWrapper',
    'LayerDecayOptimWrapperConstructor', 'layer_id', 'AtomicCheckpointHook',
    'RNGStateHook', 'FiniteLossHook', 'FiniteInputHook',
    'ReleaseClassifierHook', 'RankMeanLossHook', 'SafeCheckpointLoadingHook',
    'fault_tolerant_training', 'CheckpointError', 'latest_complete_checkpoint',
    'read_checkpoint', 'verify_checkpoint', 'CPUDistributedDataParallel',
    'CPUSyncBatchNorm', 'init_cpu_distributed', 'partial_path',
    'remove_partials'
]
