"""The run's config: ``RUN/config.yaml`` and the loggers' run config (W&B's config panel)."""

import subprocess
from pathlib import Path
from typing import Any

import yaml
from lightning import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback

from app import versions
from app.runs.folder import run_folder
from data.contract import provided
from data.files import write_whole

PROJECT = Path(__file__).resolve().parents[1]


def git_state(folder: Path = PROJECT) -> dict[str, str | bool] | None:
    """The commit the code is at and whether it has uncommitted changes; None outside git."""
    try:
        git = {"cwd": folder, "capture_output": True, "text": True, "timeout": 10}
        commit = subprocess.run(["git", "rev-parse", "HEAD"], **git)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], **git)
    except (OSError, subprocess.SubprocessError):
        return None
    if commit.returncode != 0:
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


class RunConfig(SaveConfigCallback):
    """``RUN/config.yaml`` and every logger's run config (with the git state); the values the CLI filled
    in (``given``) as the user gave them: ``fit --config RUN/config.yaml`` starts a new run beside it."""

    def __init__(self, *args: Any, given: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given = given or {}

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage != "fit" and (run_folder(trainer) / self.config_filename).is_file():
            return
        self.config = self.config.clone()
        for key, value in self.given.items():
            self.config[key] = value
        # Dumped once, for the file and the loggers: each dump checks the whole config again.
        self.dumped = self.parser.dump(self.config, skip_none=False) if trainer.is_global_zero else ""
        if self.save_to_log_dir and not self.already_saved:
            # Lightning's own save writes over the file in place: a full disk would leave half of it.
            path = run_folder(trainer) / self.config_filename
            if trainer.is_global_zero:
                write_whole(path, self.dumped.encode(), "or pass another --trainer.default_root_dir")
            self.save_to_log_dir = False
        super().setup(trainer, pl_module, stage)

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        config = yaml.safe_load(self.dumped)
        config["git"] = git_state()
        config["versions"] = versions.recorded()
        fingerprint = provided(trainer.datamodule, "fingerprint")  # on rank 0 only: save_config's
        config["data_fingerprint"] = fingerprint() if fingerprint is not None else None
        for logger in trainer.loggers:
            logger.log_hyperparams(config)
