"""Optional part: ``python -m app serve``, a checkpoint behind an HTTP endpoint with LitServe.

To drop it: ``rm -r app/serve tests/app/serve benchmarks/serve.py`` and its line in ``pyproject.toml``.
"""
