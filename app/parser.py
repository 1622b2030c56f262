"""The argument parser: jsonargparse's errors as one line, without its usage text."""

import difflib
import functools
import importlib
import re
import sys

import torch
from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import register_type, registered_types
from lightning.pytorch.cli import LightningArgumentParser

from app import internals
from app.errors import fail
from models.nets.net import Net

# The parts of jsonargparse's account of a failed Union that do not help.
NOISE = ("Does not validate", "Subtypes:", "Errors:", "Given value", "Expected a <class 'NoneType'>")

# What the types jsonargparse names accept, in words; restricted numbers add their range.
PLAIN = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "NoneType": "null",
    "tuple": "a list in brackets",
    "list": "a list in brackets",
}
SIGNS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
# How jsonargparse says which value a type refused, when no "Given value" line does.
REFUSED = (
    r"(?P<value>\S+) does not conform to restriction .*",
    r"(?:invalid literal for int\(\) with base 10|could not convert string to float): '(?P<value>.*)'",
    r"(?:Expected a <class '[\w.]+'>)\. Got value: (?P<value>.*)",
)


# The options that pick a class by name or import path, and the kind of class each takes.
CHOSEN = {
    "model.optimizer": (torch.optim.Optimizer, "torch.optim.Optimizer"),
    "model.scheduler": (torch.optim.lr_scheduler.LRScheduler, "LR scheduler"),
    "model.net": (Net, "nn.Module"),  # short names: the networks in models/nets/
}
# Where a config picks a class that users switch with a flag (--data CIFAR10DataModule).
SWITCHED_CLASSES = ("data", "model.net")


class Parser(LightningArgumentParser):
    """LightningCLI's parser, except that a bad flag or config ends in one ``error:`` line, exit 1.

    jsonargparse prints its whole usage (~80 lines) before the error, which is often several lines
    of the alternatives it tried: the one line with the error says it better.
    """

    def __init__(self, *args, **kwargs) -> None:
        serialize_checked()
        super().__init__(*args, **kwargs)

    def get_defaults(self, *args, **kwargs) -> Namespace:
        """The defaults, with ``data`` and ``model.net`` holding only the init_args a config set.

        jsonargparse carries init_args over when a later ``--data X`` or YAML changes the class_path
        and X takes them (by design: a value you set survives the switch). Filled in from the first
        class's signature, MNIST's ``val_size: 5000`` would pass for a value of yours and replace X's
        own default. Only these two: a logger switched to ``CSVLogger`` relies on the ``save_dir``
        it takes over from the default logger until the run folder is known.
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

    def add_subcommands(self, *args, **kwargs):
        """Keep the subcommands' action: an unknown key of a config file is looked up in its parser."""
        self.subcommands_action = super().add_subcommands(*args, **kwargs)
        return self.subcommands_action

    def parse_args(self, args: list[str] | None = None, *more, **kwargs) -> Namespace:
        self.given = list(sys.argv[1:] if args is None else args)  # for error(): the order of the flags
        return super().parse_args(args, *more, **kwargs)

    def error(self, message: str, ex: Exception | None = None) -> None:
        if not self.exit_on_error:  # jsonargparse is trying alternatives: it catches this error
            super().error(message, ex)
        line = folded(message)
        found = out_of_type(message) or misspelt(line, self) or class_problem(line) or line
        fail(found + chosen_after(line, getattr(self, "given", [])))


@functools.cache
def class_defaults(class_path: str) -> Namespace:
    """The defaults of the class at ``class_path``'s signature, as jsonargparse reads them."""
    module, _, name = class_path.rpartition(".")
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(getattr(importlib.import_module(module), name), fail_untyped=False)
    return parser.get_defaults()


_CHECKED: set[type] = set()


def serialize_checked() -> None:
    """Make every restricted number type (``PositiveInt``...) serialize only the values it accepts.

    jsonargparse serializes them with their bare base type and takes the first type of a union that
    serializes a value: ``PositiveInt | OpenUnitInterval`` would write 0.2 as 0 in ``--print_config``
    and in the run's ``config.yaml``.
    """
    for number in list(registered_types.values()):
        if internals.number_restrictions(number) and number not in _CHECKED:
            register_type(number, serializer=functools.partial(_checked, number))
            _CHECKED.add(number)


def _checked(number: type, value: object) -> int | float:
    return _base(number)(number(value))


def _base(number: type) -> type:
    """``int`` or ``float``: the type a restricted number type extends."""
    return int if issubclass(number, int) else float


def folded(message: str) -> str:
    """jsonargparse's message on one line, less the parts that do not help."""
    lines = (line.strip(" -") for line in message.replace('"<unicode string>", ', "").splitlines())
    return " ".join(line for line in lines if line and not line.startswith(NOISE))


def misspelt(message: str, parser: ArgumentParser) -> str | None:
    """An unknown option's line, with the options whose names are close; None for other errors."""
    unknown = re.fullmatch(r"unrecognized arguments: --([\w.]+).*", message)
    in_config = re.fullmatch(r"Subcommand '(\w+)' does not accept option '([\w.]+)'.*", message)
    in_class = re.search(
        r"Parser key \"([\w.]+)\": Problem with given class_path '([\w.]+)': Option '(\w+)'", message
    )
    dashes = "" if in_config else "--"  # a config file's key, or a flag
    if in_config:  # raised by the parser of all subcommands: look in this one's
        parser = parser.subcommands_action.choices[in_config[1]]
    if unknown or in_config:
        given = (unknown or in_config).groups()[-1]
        known = [o.removeprefix("--") for o in internals.option_names(parser)]
    elif in_class:
        key, class_path, name = in_class.groups()
        given = f"{key}.{name}"
        known = [f"{key}.{option}" for option in vars(class_defaults(class_path))]
        message = f"--{given} is not an option of {class_path.rsplit('.', 1)[-1]}"
    else:
        return None
    close = difflib.get_close_matches(given, [k for k in known if not k.endswith("+")], n=3, cutoff=0.8)
    return message + (f"; close: {', '.join(dashes + name for name in close)}" if close else "")


def chosen_after(message: str, given: list[str]) -> str:
    """For an option refused by the class it was read for, where the flag choosing another class comes
    later (``--data.image_size 32 --data ImageFolderDataModule``): the advice to give the class first."""
    refused = re.search(r'Parser key "([\w.]+)": .*Option \'(\w+)\' is not accepted', message)
    if not refused or refused[1] not in SWITCHED_CLASSES:
        return ""
    key, option = refused.groups()
    flag = next((i for i, a in enumerate(given) if a.split("=", 1)[0] == f"--{key}.{option}"), None)
    for i, arg in enumerate(given[flag + 1 :] if flag is not None else [], start=(flag or 0) + 1):
        name, _, value = arg.partition("=")
        if name == f"--{key}":
            chosen = value or (given[i + 1] if i + 1 < len(given) else "")
            return f"; --{key} {chosen} comes after it: give --{key} {chosen} first, then its options"
    return ""


def class_problem(message: str) -> str | None:
    """A class chosen by name (``--model.optimizer AdamW``) that is unknown, lacks an option, misses a
    required one or gets a value out of range, as one line; None for other errors."""
    head = re.match(
        r'Parser key "([\w.]+)": (?:Type .*? expects a function or a callable class: )?(.*)', message
    )
    if not head:
        return None
    key, rest = head.groups()
    unknown = re.match(r"Expected a path but (\S+) either not accessible or invalid (.*)", rest)
    if unknown:
        name, why = unknown.groups()
        several = re.search(r"Multiple subclasses with name \w+\. .*?: (.*?)\.?$", why)
        if several:
            return f"--{key} {name} names several classes: give one of {several[1]}"
        if key not in CHOSEN:
            return None
        base, kind = CHOSEN[key]
        if "." in name:
            return f"--{key} {name}: no {kind} class can be imported from there"
        names = sorted({c.__name__ for c in _subclasses(base)})
        same = [n for n in names if n.lower() == name.lower()]
        close = same + [n for n in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if n not in same]
        hint = f"close: {', '.join(close)}" if close else "give your own class by its import path"
        return f"--{key} {name}: no such class; {hint}"
    chosen = re.search(r"class_path[= ]'([\w.]+)'", rest)
    cls = chosen[1].rsplit(".", 1)[-1] if chosen else None
    option = re.search(r"Option '(\w+)' is not accepted", rest)
    if option and chosen:
        known = [name for name in vars(class_defaults(chosen[1])) if name != "params"]
        close = difflib.get_close_matches(option[1], known, n=3, cutoff=0.6)
        return f"--{key}.{option[1]} is not an option of {cls}; its options: {', '.join(close or known)}"
    required = re.match(r"the following arguments are required: ([\w, ]+)", rest)
    if required:
        names = [f"--{key}.{name}" for name in required[1].split(", ")]
        return f"--{key}{f' {cls}' if cls else ''} needs {', '.join(names)}"
    bad = re.match(r'Parser key "(\w+)": Not of type (\w+): (\S+) does not conform', rest)
    allowed = _allowed(bad[2]) if bad else None
    return f"--{key}.{bad[1]} must be {allowed}, got {bad[3]}" if allowed else None


def _subclasses(base: type) -> list[type]:
    """The subclasses of ``base`` imported so far, those that a short name can pick."""
    found, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return [c for c in found if not c.__name__.startswith("_")]


def out_of_type(message: str) -> str | None:
    """``--KEY must be ALLOWED, got VALUE`` for a value its type refuses; None for other errors.

    ALLOWED comes from the types themselves (``PositiveInt``: an integer > 0), so the line says
    the range whichever way jsonargparse worded its refusal.
    """
    lines = message.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip(" -").startswith('Parser key "')]
    if not starts:
        return None
    chain: list[int] = []  # the innermost key's line and those of the keys it is nested in
    for start in starts:
        while chain and _indent(lines[chain[-1]]) >= _indent(lines[start]):
            chain.pop()
        chain.append(start)
    keys = [re.findall(r'Parser key "([^"]+)"', lines[i])[0] for i in chain]
    # What the innermost key's type said: the lines indented under it.
    depth = _indent(lines[starts[-1]])
    block: list[str] = []
    for line in lines[starts[-1] + 1 :]:
        if _indent(line) <= depth:
            break
        block.append(line.strip(" -"))
    if not block:
        return None
    if block[0].startswith("Does not validate against any of the Union subtypes"):
        listed = next((line for line in block if line.startswith("Subtypes: ")), "")
        # A class, fixed values, or a tuple or list of anything.
        subtype = r"<class '([\w.]+)'>|typing\.Literal\[([^\]]*)\]|(tuple|list)\[[^\]]*\]"
        if not re.fullmatch(rf"Subtypes: \[(?:(?:{subtype})(?:, |\]$))+", listed):
            return None
        found = re.findall(subtype, listed)
        names = [
            (name or sequence).rsplit(".", 1)[-1] or f"Literal[{values}]" for name, values, sequence in found
        ]
    else:
        choices = re.fullmatch(r"Expected a typing\.Literal\[(.*)\]\. Got value: (.*)", block[0])
        if choices and len(block) == 1:
            return f"--{'.'.join(keys)} must be one of {choices[1]}, got {choices[2]}"
        length = re.fullmatch(r"Expected a tuple with (\d+) elements\. Got value: (.*)", block[0])
        if length and len(block) == 1:
            return f"--{'.'.join(keys)} must be a list of {length[1]} in brackets, got {length[2]}"
        match = re.fullmatch(r"Not of type (\w+): .*|Expected a <class '([\w.]+)'>.*", block[0])
        if not match or len(block) > 1:
            return None
        names = [(match[1] or match[2]).rsplit(".", 1)[-1]]
    allowed = [_allowed(name) for name in names]
    if None in allowed:
        return None
    given = "Given value: "
    value = next((line.removeprefix(given) for line in block if line.startswith(given)), None)
    if value is None:
        found = (re.fullmatch(rf"(?:Not of type \w+: )?{pattern}", block[0]) for pattern in REFUSED)
        value = next((match["value"] for match in found if match), None)
    got = "" if value is None else f", got {value}"
    return f"--{'.'.join(keys)} must be {' or '.join(allowed)}{got}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" -"))


def _allowed(name: str) -> str | None:
    """What type ``name`` accepts, in words (``an integer > 0``); None if it is none we can say."""
    if name in PLAIN:
        return PLAIN[name]
    if name.startswith("Literal["):  # Literal[1]: the value itself
        return " or ".join(name.removeprefix("Literal[").removesuffix("]").split(", "))
    found = [t for t in registered_types.values() if getattr(t, "__name__", None) == name]
    restricted = internals.number_restrictions(found[0]) if len(found) == 1 else None
    if not restricted:
        return None
    kind = PLAIN[_base(found[0]).__name__]
    bounds, join = dict(restricted[0]), restricted[1]
    low = next((op for op in ("gt", "ge") if op in bounds), None)
    high = next((op for op in ("lt", "le") if op in bounds), None)
    if join == "and" and low and high and len(bounds) == 2:
        left, right = "(" if low == "gt" else "[", ")" if high == "lt" else "]"
        return f"{kind} in {left}{bounds[low]:g}, {bounds[high]:g}{right}"
    return f"{kind} " + f" {join} ".join(f"{SIGNS.get(op, op)} {ref:g}" for op, ref in bounds.items())
