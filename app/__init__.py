"""The command line around ``models`` and ``data``: ``python -m app fit|validate|test|predict|export``.

- ``cli.py``: the LightningCLI subclass and ``main``; ``trainer.py``: the Trainer it builds.
- ``runs/``: the run folder and everything in it (config, checkpoints, loggers).
- ``callbacks/``: what the Trainer runs besides the model (all listed by ``--print_config``).
- ``distributed/``: CPU SyncBatchNorm, ranks that end together, the collective timeout.
- ``dp/``, ``export/``, ``pictures/``: optional parts, each deletable as a folder and one line.
- ``errors.py``: the mistakes a user can fix, printed as one ``error:`` line.
- ``process.py``: what the CLI changes in its process when it starts (nothing happens on import).
"""
