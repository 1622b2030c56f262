"""Command-line glue: LightningCLI over the ``models`` and ``data`` packages."""
