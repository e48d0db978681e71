"""Parameter and FLOP counting with mmengine's analysis tools.

mmengine's ``FlopAnalyzer`` (fvcore's counter: one multiply-add = one FLOP)
has no handle for ``aten::scaled_dot_product_attention``, the fused kernel
our window attention runs on, and would silently skip QK^T and AV. We add
that handle so attention is counted like the explicit matmuls of the
official implementation.
"""
from typing import Any, Dict, List, Sequence

import torch
import torch.nn as nn
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape


def sdpa_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """QK^T (L x S x E) plus AV (L x S x Ev) per batch-head."""
    q_shape, k_shape, v_shape = (get_shape(v) for v in inputs[:3])
    *batch, L, E = q_shape
    S, Ev = k_shape[-2], v_shape[-1]
    n = 1
    for b in batch:
        n *= b
    return n * L * S * (E + Ev)


def get_complexity(model: nn.Module,
                   input_shape: Sequence[int]) -> Dict[str, float]:
    """FLOPs (multiply-adds) and parameters for one input of ``input_shape``."""
    model = model.eval()
    inputs = (torch.randn(1, *input_shape), )
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle('aten::scaled_dot_product_attention', sdpa_flop_jit)
    analyzer.unsupported_ops_warnings(False)
    analyzer.uncalled_modules_warnings(False)
    with torch.no_grad():
        flops = analyzer.total()
    return dict(flops=float(flops), params=float(parameter_count(model)['']))
