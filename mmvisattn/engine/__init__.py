from ..checkpoint import (CheckpointError, latest_complete_checkpoint,
                          read_checkpoint, verify_checkpoint)
from .cpu_distributed import (CPUDistributedDataParallel, CPUSyncBatchNorm,
                              init_cpu_distributed)
from .hooks import (AtomicCheckpointHook, FiniteLossHook, RankMeanLossHook,
                    ReleaseClassifierHook, RNGStateHook,
                    fault_tolerant_training)
from .optim_constructor import LayerDecayOptimWrapperConstructor, layer_id

__all__ = [
    'LayerDecayOptimWrapperConstructor', 'layer_id', 'AtomicCheckpointHook',
    'RNGStateHook', 'FiniteLossHook', 'ReleaseClassifierHook', 'RankMeanLossHook',
    'fault_tolerant_training', 'CheckpointError', 'latest_complete_checkpoint',
    'read_checkpoint', 'verify_checkpoint', 'CPUDistributedDataParallel',
    'CPUSyncBatchNorm', 'init_cpu_distributed'
]
