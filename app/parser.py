"""The argument parser: LightningCLI's, raising its errors for the CLI to print as one line."""

import difflib
import functools
import pkgutil

from jsonargparse import ArgumentError, Namespace
from jsonargparse.typing import register_type, registered_types
from lightning.pytorch.cli import LightningArgumentParser

# Where a config picks a class that users switch with a flag (--data CIFAR10DataModule).
SWITCHED_CLASSES = ("data", "model.net")


class Parser(LightningArgumentParser):
    """LightningCLI's parser, raising ``ArgumentError`` where it printed ~80 lines: see :func:`one_line`."""

    def __init__(self, *args, **kwargs) -> None:
        serialize_checked()
        super().__init__(*args, **{**kwargs, "exit_on_error": False})

    def add_subcommands(self, *args, **kwargs):
        """Keep the subcommands' action: its ``choices`` are their parsers, whose options a typo is near."""
        self.subcommands_action = super().add_subcommands(*args, **kwargs)
        return self.subcommands_action

    # workaround: jsonargparse carries init_args over to a later --data class (4.52); gone when it drops them
    def get_defaults(self, *args, **kwargs) -> Namespace:
        """The defaults, with ``data`` and ``model.net`` holding only the init_args a config set.

        jsonargparse carries init_args over when a later ``--data X`` changes the class: MNIST's default
        ``val_size: 5000`` would pass for a value of yours and replace X's own default.
        """
        cfg = super().get_defaults(*args, **kwargs)
        for key in SWITCHED_CLASSES:
            spec = cfg.get(key)
            if isinstance(spec, Namespace) and isinstance(spec.get("init_args"), Namespace):
                own = class_defaults(spec.class_path)
                for name, value in list(spec.init_args.items()):
                    if name in own and own[name] == value:
                        del spec.init_args[name]
        return cfg


def one_line(message: str, given: list[str], parser: Parser) -> str:
    """jsonargparse's ``message`` folded to one line; where a flag in ``given`` is no option of the
    subcommand's parser, the options whose names are close to it."""
    subcommand = next((arg for arg in given if not arg.startswith("-")), None)
    actions = getattr(parser, "subcommands_action", None)
    if actions is None or subcommand not in actions.choices:
        return " ".join(message.split())
    try:
        defaults = actions.choices[subcommand].get_defaults()
    except (ArgumentError, TypeError, ValueError):
        # The bad value is in a default config file (a run's config.yaml), read again here: no hint.
        return " ".join(message.split())
    # Every key a config of this subcommand can set, class options without their ``init_args`` level.
    known = {key.replace(".init_args.", ".") for key in defaults.keys()}  # noqa: SIM118 (Namespace: no __iter__)
    known |= {key.rsplit(".", 1)[0] for key in known}
    close, keys = [], [arg.removeprefix("--").split("=", 1)[0].removesuffix("+") for arg in given]
    for arg, key in zip(given, keys, strict=True):
        if arg.startswith("--") and key not in known:
            close += [
                k for k in difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.8) if k not in close
            ]
    line = " ".join(message.split()) + (f"; close: {', '.join('--' + k for k in close)}" if close else "")
    for switched in SWITCHED_CLASSES:
        # An option of the class a later flag chooses is read for the class chosen so far.
        first = next((k for k in keys if k.startswith(switched + ".")), None)
        if first and switched in keys and keys.index(first) < keys.index(switched):
            chosen = given[keys.index(switched)].partition("=")[2] or given[keys.index(switched) + 1]
            line += f"; --{switched} {chosen} comes after --{first}: give it first"
    return line


@functools.cache
def class_defaults(class_path: str) -> Namespace:
    """The defaults of the class at ``class_path``'s signature, as jsonargparse reads them."""
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_class_arguments(pkgutil.resolve_name(class_path), fail_untyped=False)
    return parser.get_defaults()


# workaround: jsonargparse writes restricted numbers as their base type (4.52); gone when it checks them
def serialize_checked() -> None:
    """Make every restricted number type (``PositiveInt``...) serialize only the values it accepts.

    jsonargparse serializes them as their base type, and a union as its first type that serializes the
    value: ``PositiveInt | OpenUnitInterval`` would write 0.2 as 0 in ``config.yaml``.
    """
    for number in list(registered_types.values()):
        if isinstance(number, type) and number not in (int, float, bool) and issubclass(number, int | float):
            base = int if issubclass(number, int) else float
            register_type(number, serializer=lambda value, number=number, base=base: base(number(value)))
