"""Errors the user can fix; the CLI prints their message as one line and exits with status 1."""


class UsageError(Exception):
    """A flag or config value that cannot work; the message says which."""


class RunFolderError(Exception):
    """The run folder cannot be made or written; the message says which and why."""
