"""``python -m app``: see :mod:`app.cli`."""

from app.cli import main

main()
