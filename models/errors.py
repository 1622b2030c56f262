"""The mistakes in model options a user can fix (``models/`` never imports ``app/``, which lists it)."""


class ModelError(Exception):
    """A model option that cannot work (a weights file, a freeze pattern); the message, one line, says why."""
