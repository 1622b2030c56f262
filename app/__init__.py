"""Command-line glue: LightningCLI over the ``models`` and ``data`` packages.

Importing it registers our ``dp`` strategy with Lightning, tunes glibc's malloc for training
(:mod:`app.allocator`) and has the process group destroyed at exit (:mod:`app.process_group`); every
process of a job imports it, spawned ones too.
"""

from app import dp_strategy  # noqa: F401
from app.allocator import keep_freed_memory
from app.process_group import destroy_process_group_at_exit

keep_freed_memory()
destroy_process_group_at_exit()
