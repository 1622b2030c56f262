"""Command-line glue: LightningCLI over the ``models`` and ``data`` packages.

Importing it registers our ``dp`` strategy with Lightning and tunes glibc's malloc for training
(:mod:`app.allocator`); every process of a job imports it, spawned ones too.
"""

from app import dp_strategy  # noqa: F401
from app.allocator import keep_freed_memory

keep_freed_memory()
