"""Command-line glue: LightningCLI over the ``models`` and ``data`` packages.

Importing it registers our ``dp`` strategy with Lightning.
"""

from app import dp_strategy  # noqa: F401
