"""Model analysis used by the tools (``tools/analysis_tools/get_flops.py``)
and the tests: parameter and FLOP counting under the papers' conventions.
Not imported by ``import mmvisattn``."""
