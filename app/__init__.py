"""The command line around ``models`` and ``data``: ``python -m app fit|validate|test|predict|export``."""
