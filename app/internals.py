"""The private names of Lightning, jsonargparse and torch.distributed this project reaches, one function each.

None today. A name added here has no public counterpart in a release ``pyproject.toml`` allows; its
comment names the upstream request for one, and ``tests/app/test_internals.py`` checks that it still
works, so a release that renames it fails there, named, rather than in a user's run.
"""
