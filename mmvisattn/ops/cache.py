"""A cache for tensors that depend only on shapes and a device (window
layouts, masks, index tensors)."""
import functools

import torch

from .symbolic import is_concrete, recording


def shape_cache(maxsize: int):
    """``functools.lru_cache(maxsize)`` whose values are never inference
    tensors: a cached tensor outlives the call that built it, and one built
    under ``torch.inference_mode()`` could never be saved for backward
    afterwards ("Inference tensors cannot be saved for backward"). The
    arguments must say everything the tensors depend on (sizes, device,
    dtype); the cache is bounded by ``maxsize``.

    While a graph is recorded (:func:`.symbolic.recording`: torch.compile,
    torch.export and the dynamo ONNX exporter, torch.jit.trace, the
    TorchScript ONNX exporter), or when a size is not a plain int (a traced
    tensor or a ``SymInt``), the function is called uncached: the recorder
    must see the ops that build the tensors, and what it builds (a
    FakeTensor under torch.export, a traced value under torch.jit.trace)
    must never be handed to a later eager call. (Before this rule, one
    dynamo export of a model at a size it had not run at left FakeTensor
    layouts in the cache, and eager forwards at that size after it were
    silently wrong.)"""

    def decorate(build):

        @functools.lru_cache(maxsize=maxsize)
        def cached(*args, **kwargs):
            if torch.is_inference_mode_enabled():
                with torch.inference_mode(False):
                    return build(*args, **kwargs)
            return build(*args, **kwargs)

        @functools.wraps(build)
        def call(*args, **kwargs):
            sizes = [s for a in (*args, *kwargs.values())
                     if not isinstance(a, (str, torch.device, torch.dtype))
                     for s in (a if isinstance(a, tuple) else (a, ))]
            if recording() or not is_concrete(*sizes):
                return build(*args, **kwargs)
            return cached(*args, **kwargs)

        call.cache_info = cached.cache_info
        call.cache_clear = cached.cache_clear
        return call

    return decorate
