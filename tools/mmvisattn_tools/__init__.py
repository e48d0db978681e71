"""Helpers the tools share: command lines and configs (``common``), FLOP
counting (``complexity``, ``flops``) and the peer pair the benchmarks time
(``benchmark``). Tool code, not part of the runtime package ``mmvisattn``:
``setup.py`` installs it beside it from ``tools/mmvisattn_tools``, so every
tool imports it as it imports mmvisattn, with no ``sys.path`` edit."""
