"""What the CLI changes in its own process when it starts; importing any module here changes nothing."""

import importlib

from app.allocator import keep_freed_memory


def prepare() -> None:
    """Tune the allocator and register ``--trainer.strategy dp``."""
    keep_freed_memory()
    importlib.import_module("app.dp").register()  # optional part: app/dp/
