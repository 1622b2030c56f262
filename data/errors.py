"""data/'s own errors: what the CLI reports in one line (data/ imports nothing of app/)."""


class DataError(Exception):
    """Missing or unusable data; the message, one line, says what to do about it."""

    def __str__(self) -> str:
        message = super().__str__()
        # Re-raised by a DataLoader from a worker process, its message is the worker's traceback, whose last
        # line is, in Python's format, "module.Class: <the message>".
        last = message.rstrip().rsplit("\n", 1)[-1]
        prefix = f"{type(self).__module__}.{type(self).__qualname__}: "
        return last.removeprefix(prefix) if "\n" in message and last.startswith(prefix) else message


class DatasetNotFoundError(DataError):
    """A data set is not on disk and cannot be fetched."""
