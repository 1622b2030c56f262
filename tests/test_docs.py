"""Every path, flag and ``make`` target that README.md and docs/*.md name exists.

The docs are checked against the code, never the code against the docs: nothing here asserts a
sentence, a heading or a figure. Any README passes (a cloner's rewrite, a project's short one) as long
as what it names is there; it fails only when a doc names a project path, a ``python -m app`` flag or a
``make`` target that is gone, and the failure lists each one with the doc that names it.

What counts as named, in code (fenced blocks and inline spans) and in Markdown links:
- a path whose first part is one of the project's top-level files or folders (``app/``, ``configs/``,
  ``Makefile``, ...), or a link to a file; names starting with ``my_`` are a reader's own files, examples
  of what to write, and globs must match something;
- a dotted flag (``--trainer.devices``) anywhere, and any flag of a ``python -m app SUBCOMMAND`` line,
  held against ``SUBCOMMAND --help`` (run in this process); a flag of a class-typed option
  (``--data.root``, ``--model.optimizer.lr``) against ``--OPTION.help CLASS`` for the classes that the
  docs and ``configs/`` give that option;
- ``make TARGET``, held against ``make -n TARGET``.
"""

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.cli import ROOT, run_app

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The project's top level, whichever of it is there now: a path under a dropped part still counts.
TOP = {
    *("app", "models", "data", "configs", "tests", "docs", "scripts", "benchmarks", ".ci", ".github"),
    *("Makefile", "pyproject.toml", "Dockerfile", "docker.mk", "copier.yml", "constraints.txt"),
    *(
        p.name
        for p in ROOT.iterdir()
        if not p.name.startswith((".venv", ".git")) and p.name not in ("runs", "datasets")
    ),
}
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
PATH = re.compile(r"(?<![\w./~$:-])(\.?[\w-]+(?:/[\w.*-]+)*/?)")
FLAG = re.compile(r"(?<![\w-])--([a-z_][\w]*(?:\.[a-z_]\w*)*)")
APP = re.compile(r"-m app (\w+)?(.*)")
MAKE = re.compile(r"(?:^|[\s;&(])make ([a-z][\w-]*)(?![\w=])")
CLASS = re.compile(r"--([a-z_][\w.]*?)\+?(?:=|\s+)([A-Za-z_][\w.]*)")


def code(text: str) -> list[str]:
    """The lines of a doc's fenced blocks (continued lines joined) and its inline code spans."""
    lines = [line for block in FENCE.findall(text) for line in block.replace("\\\n", " ").splitlines()]
    return lines + INLINE.findall(FENCE.sub("", text))


def paths(doc: Path, text: str) -> set[str]:
    """The project paths a doc names (relative to the root)."""
    found = set()
    for line in code(text):
        for name in PATH.findall(line):
            first = name.split("/")[0]
            if first in TOP and ("/" in name or "." in name or name[:1].isupper()):
                found.add(name.rstrip("/"))
    for target in LINK.findall(text):
        if "://" not in target and not target.startswith("mailto:"):
            found.add(os.path.relpath((doc.parent / target).resolve(), ROOT.resolve()))
    return {name for name in found if not any(part.startswith("my_") for part in name.split("/"))}


def missing_paths(names: set[str]) -> set[str]:
    return {name for name in names if not (any(ROOT.glob(name)) if "*" in name else (ROOT / name).exists())}


def make_targets(text: str) -> set[str]:
    return {target for line in code(text) for target in MAKE.findall(line)}


@functools.cache
def make_has(target: str) -> bool:
    """Whether ``make -n TARGET`` in the project finds a rule for it (a dry run: nothing is made)."""
    done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    return done.returncode == 0


def flags(text: str) -> set[tuple[str, str]]:
    """``(subcommand, flag)`` pairs: each ``-m app SUB`` line's subcommand (flag ``""``) and flags (up to
    a comment, a pipe or the next command), and every dotted flag elsewhere (subcommand ``""``: any)."""
    found = set()
    for line in code(text):
        for sub, rest in APP.findall(line):
            rest = re.split(r" #|\||&&|;|>", rest)[0]
            found |= {(sub, ""), *((sub, flag) for flag in FLAG.findall(rest))}
        found |= {("", flag) for flag in FLAG.findall(line) if "." in flag}
    return found


def classes(text: str) -> dict[str, set[str]]:
    """The class names given to each option, in ``text`` (``--data ImageFolderDataModule``) and in
    ``configs/``'s presets (``class_path: X`` or a class name as the value)."""
    given: dict[str, set[str]] = {}
    for line in code(text):
        for key, name in CLASS.findall(line):
            last = name.split(".")[-1]
            if last[:1].isupper() and not last.isupper():  # a class, not a placeholder (NAME, CKPT)
                given.setdefault(key, set()).add(name)

    def walk(value, keys: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("class_path"), str):
                given.setdefault(".".join(keys), set()).add(value["class_path"])
            for key, inner in value.items():
                if key != "class_path":
                    walk(inner, keys if key == "init_args" else (*keys, str(key).rstrip("+")))
        elif isinstance(value, list):
            for inner in value:
                walk(inner, keys)
        elif isinstance(value, str) and keys and re.fullmatch(r"(\w+\.)*[A-Z]\w*", value):
            given.setdefault(".".join(keys), set()).add(value)

    for preset in sorted((ROOT / "configs").rglob("*.yaml")):
        walk(yaml.safe_load(preset.read_text()), ())
    return given


class Options:
    """The CLI's own word on its flags: ``SUB --help`` and ``SUB --OPTION.help CLASS``, each run once, in
    this process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.listed: dict[tuple[str, ...], set[str] | None] = {}

    def help(self, *args: str) -> set[str] | None:
        """The flags ``python -m app ARGS`` lists, or None where it fails (an unknown subcommand or class)."""
        if args not in self.listed:
            result = run_app(*args, shrink=False, cwd=self.folder)
            found = re.findall(r"--[a-z_][\w.+]*", result.stdout)
            self.listed[args] = {f.rstrip(".+") for f in found} if result.returncode == 0 else None
        return self.listed[args]

    def has(self, sub: str, flag: str, given: dict[str, set[str]]) -> bool:
        """Whether ``python -m app SUB`` (any subcommand where ``sub`` is empty) takes ``--FLAG`` (``sub``
        itself, where ``flag`` is empty), with the classes ``given`` to each class-typed option."""
        for command in [sub] if sub else ["fit", "tune", "export", "shard", "serve"]:
            listed = self.help(command, "--help")
            if listed is None:
                continue
            if not flag or f"--{flag}" in listed:
                return True
            # A class-typed option (its --OPTION.help is listed): the flag is one of a class it takes.
            parts = flag.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                option = ".".join(parts[:cut])
                if f"--{option}.help" in listed:
                    for name in sorted(given.get(option, ())):
                        of_class = self.help(command, f"--{option}.help", name)
                        if of_class and f"--{flag}" in of_class:
                            return True
                    break
        return False


def missing(doc: Path, text: str, options: Options) -> list[str]:
    """What ``text`` (the doc ``doc``) names that the project does not have, each said as it is named."""
    gone = sorted(missing_paths(paths(doc, text)))
    gone += sorted(f"make {target}" for target in make_targets(text) if not make_has(target))
    given = classes(text)
    gone += sorted(
        " ".join(["python -m app" if sub or not flag else "", sub, f"--{flag}" if flag else ""]).strip()
        for sub, flag in flags(text)
        if not options.has(sub, flag, given)
    )
    return gone


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    found = Options(tmp_path_factory.mktemp("docs-help"))
    found.help("fit", "--help")  # the one that imports the CLI; every doc's check reads it
    return found


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@needs_make
@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_what_a_doc_names_exists(doc, options):
    assert missing(doc, doc.read_text(), options) == [], f"{doc.relative_to(ROOT)} names what is gone"


@needs_make
def test_a_removed_flag_path_or_target_is_reported(options):
    """The check can fail: a doc naming one gone thing of each kind gets each one reported, and only those."""
    text = """
Train with `python -m app fit --trainer.max_epochs 2 --data.batch_size 64 --no_such_flag 1`; see
`configs/mnist.yaml`, `configs/*.yaml`, `app/gone.py` and [the guide](docs/gone.md); `make test`,
`make no-such-target`, `python -m app no_such_command`. A preset of yours: `configs/my_run.yaml`.

```bash
python -m app fit --data CIFAR10DataModule --data.root photos --data.no_such_option 3 \\
    --model.optimizer AdamW --model.optimizer.weight_decay 0.05 --trainer.no_such_flag 1
python -m app validate --ckpt_path CKPT --data.batch_size 8
```
"""
    assert missing(ROOT / "README.md", text, options) == [
        "app/gone.py",
        "docs/gone.md",
        "make no-such-target",
        "--data.no_such_option",
        "--trainer.no_such_flag",
        "python -m app fit --data.no_such_option",
        "python -m app fit --no_such_flag",
        "python -m app fit --trainer.no_such_flag",
        "python -m app no_such_command",
    ]
