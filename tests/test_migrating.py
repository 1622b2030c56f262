"""docs/migrating.md's template commands work as written, so the guide cannot go stale.

Each ``python -m app`` (or ``torchrun ... -m app``) command of its code blocks is checked by what it
needs: a one-process command runs here (shrunk, on the test data, in this process); one that needs a
GPU, several machines or several processes is only parsed (``--print_config``; torchrun's own options
by torchrun's parser), which still shows the Trainer settings it claims. The guide's 2-process CPU
launches (Lightning's ddp, torchrun) are the ones ``tests/app/distributed/test_distributed.py`` runs
for real. Every run or parse is then held to the flags the command gives.
"""

import re
import shlex

import pytest
import yaml
from helpers.cli import ROOT, SHRINK, check, run_app, run_folder
from torch.distributed.run import get_args_parser

GUIDE = ROOT / "docs" / "migrating.md"
QUICK = [*SHRINK, "--test_after_fit=false"]
NO_LOGGER = [arg for arg in QUICK if not arg.startswith("--trainer.logger")]


def guide_commands() -> list[str]:
    """The template commands of the guide's code blocks, each once (continued lines joined)."""
    blocks = re.findall(r"```bash\n(.*?)```", GUIDE.read_text(), flags=re.S)
    lines = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    found = [line for line in lines if not line.startswith("#") and " -m app " in line]
    return list(dict.fromkeys(found))


def split(command: str) -> tuple[dict[str, str], list[str], list[str]]:
    """``command`` as its environment, its torchrun options (if any) and what follows ``-m app``."""
    words = shlex.split(command)
    env = {}
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    start = words.index("-m")
    assert words[start + 1] == "app" and words[0] in ("python", "torchrun"), command
    return env, words[1:start] if words[0] == "torchrun" else [], words[start + 2 :]


def flags(app: list[str]) -> dict[str, str]:
    """``--key value`` and ``--key=value`` pairs of a command line, but ``--config``."""
    found, i = {}, 1
    while i < len(app):
        key, _, value = app[i].removeprefix("--").partition("=")
        if not value:
            i, value = i + 1, app[i + 1]
        if key != "config":
            found[key] = value
        i += 1
    return found


def kind(command: str) -> str:
    _, torchrun, app = split(command)
    given = flags(app)
    gpu = given.get("trainer.accelerator") == "gpu"
    several = (
        torchrun or int(given.get("trainer.num_nodes", 1)) > 1 or int(given.get("trainer.devices", 1)) > 1
    )
    return "parse" if gpu or several else "run"


COMMANDS = guide_commands()


def short(command: str) -> str:
    """A test id: the command's flags after its preset, with no spaces."""
    tail = command.replace("--config configs/mnist.yaml", "").split("-m app fit")
    return re.sub(r"[^\w.=]+", "_", ("torchrun " if "torchrun" in tail[0] else "") + tail[-1]).strip("_")


def nested(config: dict, key: str):
    for part in key.split("."):
        config = config[part] if part in config else config["init_args"][part]
    return config


def assert_settings(config: dict, given: dict[str, str]) -> None:
    """``config`` (a printed or saved run config) holds every flag value of the command."""
    for key, value in given.items():
        held = nested(config, key)
        held = held.get("class_path", held) if isinstance(held, dict) else held
        expected = yaml.safe_load(value)
        # Devices may print as a string, a logger as its class path.
        assert str(held) == str(expected) or str(held).endswith(f".{expected}"), (key, held, value)


@pytest.fixture
def agent_folder(tmp_path):
    """A working folder with the project's ``configs/``, as in a clone."""
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    return tmp_path


def test_the_guide_has_commands_to_run_and_to_parse():
    assert {kind(c) for c in COMMANDS} == {"parse", "run"}


def test_every_flag_the_guide_names_exists(agent_folder):
    pattern = r"--(?:trainer|model|data)\.[a-z_]+|--seed_everything|--ckpt_path"
    named = set(re.findall(pattern, GUIDE.read_text()))
    helps = [run_app("fit", "--help", shrink=False, cwd=agent_folder)]
    helps.append(run_app("fit", "--data.help", "MNISTDataModule", shrink=False, cwd=agent_folder))
    for result in helps:
        check(result)
    listed = set(re.findall(r"--[a-z_.]+", "".join(result.stdout for result in helps)))
    assert named - listed == set()


@pytest.mark.parametrize("command", [c for c in COMMANDS if kind(c) == "parse"], ids=short)
def test_a_gpu_multi_machine_or_multi_process_command_parses_to_its_settings(command, agent_folder):
    """Needs GPUs, several machines or several processes: checked by parsing only."""
    _, torchrun, app = split(command)
    given = flags(app)
    if torchrun:
        options = get_args_parser().parse_args([*torchrun, "-m", "app"])
        world = int(given.get("trainer.num_nodes", 1)) * int(given.get("trainer.devices", 1))
        nodes = int(options.nnodes.split(":")[-1])  # a count, or torchrun's MIN:MAX (default 1:1)
        assert nodes * int(options.nproc_per_node) == world  # else one line refuses it
    result = run_app(*app, "--print_config", shrink=False, cwd=agent_folder)
    check(result)
    assert_settings(yaml.safe_load(result.stdout), given)


@pytest.mark.parametrize("command", [c for c in COMMANDS if kind(c) == "run"], ids=short)
def test_a_one_process_command_trains(command, mnist_root, agent_folder, monkeypatch):
    env, _, app = split(command)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    given = flags(app)
    shrink = NO_LOGGER if "trainer.logger" in given else QUICK
    result = run_app(*app, *shrink, f"--data.root={mnist_root}", shrink=False, cwd=agent_folder)
    check(result)
    assert_settings(yaml.safe_load((run_folder(agent_folder) / "config.yaml").read_text()), given)
    assert "world size 1" in result.stderr
