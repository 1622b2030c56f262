"""copier's task (copier.yml): make the copied files a project of its own. Run in the new project.

``python new_project.py TEMPLATE ANSWERS_JSON``: drops the lines of each part not kept (copier has already
left out its paths), renames the distribution, the W&B project and the README, and points ``make train``
at the chosen data set. Deterministic, so that the copies ``copier update`` compares are alike.
"""

import json
import re
import sys
from pathlib import Path

import yaml

# `make train`'s preset for each answer to `dataset`.
PRESETS = {"Fashion-MNIST": "fashion_mnist.yaml", "MNIST": "mnist.yaml", "CIFAR-10": "cifar10.yaml"}
TEMPLATE_NAME = "lightning-cnn-template"


def parts(template: Path) -> dict[str, dict]:
    """The optional parts as copier.yml defines them."""
    return yaml.safe_load((template / "copier.yml").read_text())["part_files"]["default"]


def lines_of(part: dict) -> list[dict]:
    """The lines elsewhere that plug ``part`` in (``{"file": ..., "naming": ...}`` each)."""
    line = part.get("line", [])
    return line if isinstance(line, list) else [line]


def drop_line(file: Path, naming: str) -> None:
    """Delete the one line of ``file`` that names ``naming`` (none where a dropped part took ``file``)."""
    if not file.exists():
        return
    lines = file.read_text().splitlines(keepends=True)
    naming_lines = [line for line in lines if naming in line]
    if len(naming_lines) != 1:
        sys.exit(f"error: {file} should name {naming} on one line, not {len(naming_lines)}")
    file.write_text("".join(line for line in lines if line not in naming_lines))


def drop_extra(name: str) -> None:
    """Take the pyproject extra ``name`` (a dropped part's) out: its definition, the comment lines just
    above it, and its place in the dev extra's reference to the project's own extras."""
    pyproject = Path("pyproject.toml")
    lines = pyproject.read_text().splitlines(keepends=True)
    start = end = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = ["))
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    kept = lines[:start] + lines[end + 1 :]
    own = re.compile(rf'^(\s*"{re.escape(TEMPLATE_NAME)}\[)([^\]]*)(\]",)')

    def without(match: re.Match) -> str:
        extras = [extra for extra in match[2].split(",") if extra != name]
        return f"{match[1]}{','.join(extras)}{match[3]}"

    pyproject.write_text("".join(own.sub(without, line) for line in kept))


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are TOML's for these characters)."""
    return json.dumps(text, ensure_ascii=False)


def rename(name: str, description: str, author: str) -> None:
    """pyproject's name (and the dev extra's reference to it), description and authors; the W&B project."""
    pyproject = Path("pyproject.toml")
    text = pyproject.read_text()
    text = re.sub(r'^name = ".*"$', f"name = {toml_string(name)}", text, count=1, flags=re.M)
    text = text.replace(f'"{TEMPLATE_NAME}[', f'"{name}[')
    authors = f"\nauthors = [{{ name = {toml_string(author)} }}]" if author else ""
    line = f"description = {toml_string(description)}{authors}"
    text = re.sub(r"^description = .*$", lambda _: line, text, count=1, flags=re.M)
    pyproject.write_text(text)
    for config in [Path("configs/defaults.yaml"), *sorted(Path("configs/sweeps").glob("*.yaml"))]:
        config.write_text(re.sub(rf"(\bproject: ){TEMPLATE_NAME}\b", rf"\g<1>{name}", config.read_text()))


def train_on(dataset: str) -> None:
    """``make train``'s preset: the chosen data set's."""
    makefile = Path("Makefile")
    text = makefile.read_text()
    makefile.write_text(
        re.sub(r"(-m app fit --config configs/)\S+", rf"\g<1>{PRESETS[dataset]}", text, count=1)
    )


def readme(answers: dict, kept: list[str]) -> str:
    """The project's README: what it is, the two commands, its layout, how to take template updates."""
    source = answers["_src_path"]
    optional = "".join(f"- {part}\n" for part in kept) or "- none\n"
    return f"""# {answers["project_name"]}

{answers["description"]}

Made from the Lightning CNN template, {source}: its README and docs/ document every command,
preset and option.

## Two commands

```bash
make train   # install into .venv, train configs/{PRESETS[answers["dataset"]]}, print test accuracy
make test    # install, then the fast tier of the test suite (make test-all: every tier, as .ci/run)
```

## Layout

```
app/        the command line: python -m app fit|validate|test|predict|export --help
models/     the LightningModule (image_classifier.py) and the networks (nets/)
data/       the LightningDataModules
configs/    defaults.yaml (what every command starts from) and stackable presets
tests/      the test suite
```

Optional parts of the template kept here:

{optional}
## Updating from the template

The template's answers are in `.copier-answers.yml` (commit it; do not edit it). To take the template's
later changes, with everything committed (copier comes with the dev extra: `.venv/bin/copier` after
`make setup`; it needs git):

```bash
copier update --trust        # add --defaults to keep every earlier answer without asking
git diff                     # review; then run make test and commit
```

Where your edit and the template's change touch the same lines, copier leaves git conflict markers
(`<<<<<<< before updating`, `=======`, `>>>>>>> after updating`) in the file and git lists it as
unmerged (`git status`). Edit the file to what it should say, remove the markers, then `git add` it.
"""


def remove_emptied_folders(paths: list[str]) -> None:
    """The folders above ``paths`` (a dropped part's) that copier made though nothing is left in them
    (docs/ without the migration guide); never a folder holding anything."""
    for path in paths:
        for folder in list(Path(path).parents)[:-1]:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def main() -> None:
    template, answers = Path(sys.argv[1]), json.loads(sys.argv[2])
    definition = parts(template)
    for name, part in definition.items():
        if name not in answers["parts"]:
            remove_emptied_folders(part["paths"])
            for line in lines_of(part):
                drop_line(Path(line["file"]), line["naming"])
            if "extra" in part:
                drop_extra(part["extra"])
    rename(answers["project_name"], answers["description"], answers["author"])
    train_on(answers["dataset"])
    Path("README.md").write_text(readme(answers, [p for p in definition if p in answers["parts"]]))


if __name__ == "__main__":
    main()
