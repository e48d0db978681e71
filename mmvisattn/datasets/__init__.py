"""Data transforms for mmdet pipelines (import ``mmvisattn.datasets``)."""
