"""The pair the backbone benchmarks time (our Swin and mmdet's, with the same
weights) and the timer every benchmark uses."""
import statistics
import time

from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.models.utils import swin_to_mmdet


def build_pair(arch):
    """Ours (``arch``, no stochastic depth, initialised) and mmdet's Swin
    holding the same weights."""
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    zoo = SwinTransformer.arch_zoo[arch]
    ours = SwinTransformer(arch=arch, drop_path_rate=0.)
    ours.init_weights()
    theirs = MMDetSwin(embed_dims=zoo['embed_dims'], depths=zoo['depths'],
                       num_heads=zoo['num_heads'], drop_path_rate=0.)
    theirs.load_state_dict(swin_to_mmdet(ours.state_dict()), strict=False)
    return ours, theirs


def median_ms(fn, iters: int, warmup: int) -> float:
    """Median wall time of ``fn()`` in milliseconds over ``iters`` calls,
    after ``warmup`` untimed calls (the benchmarks of tools/)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)
