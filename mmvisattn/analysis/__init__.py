"""What the analysis tools count and time, for a user's own script too:
parameters and FLOPs (``complexity``, ``flops``: ``tools/analysis_tools/
get_flops.py``) and the backbone pair the benchmarks time (``benchmark``).
Not imported by ``import mmvisattn``."""
