"""A cache for tensors that depend only on shapes and a device (window
layouts, masks, index tensors)."""
import functools

import torch


def shape_cache(maxsize: int):
    """``functools.lru_cache(maxsize)`` whose values are never inference
    tensors: a cached tensor outlives the call that built it, and one built
    under ``torch.inference_mode()`` could never be saved for backward
    afterwards ("Inference tensors cannot be saved for backward"). The
    arguments must say everything the tensors depend on (sizes, device,
    dtype); the cache is bounded by ``maxsize``."""

    def decorate(build):

        @functools.lru_cache(maxsize=maxsize)
        @functools.wraps(build)
        def cached(*args, **kwargs):
            # (torch.compile cannot trace the inference-mode query; it never
            # runs in inference mode anyway)
            if (not torch.compiler.is_compiling()
                    and torch.is_inference_mode_enabled()):
                with torch.inference_mode(False):
                    return build(*args, **kwargs)
            return build(*args, **kwargs)

        return cached

    return decorate
