"""Lightning's WandbLogger, keeping its W&B run with the run folder, online only where it can be."""

import netrc
import os
import secrets
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger
from lightning.pytorch.utilities import rank_zero_info

from app.runs.folder import job_rank_zero

ID_FILE = "wandb-id"


class WandbLogger(LightningWandbLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger`, the default logger, for run folders.

    - Its id is kept in ``SAVE_DIR/wandb-id``: every command on a run folder continues that W&B run,
      named ``NAME/version_N``.
    - Offline, in one line with the ``wandb sync`` command, where it cannot be online (``WANDB_MODE`` wins).
    - Under a W&B sweep agent, the run is the trial the agent started, grouped by its sweep.
    """

    def __init__(
        self,
        *args: Any,
        save_dir: str = ".",
        name: str | None = None,
        id: str | None = None,
        offline: bool = False,
        log_model: bool | str = False,
        **kwargs: Any,
    ) -> None:
        run = Path(save_dir)
        rank_zero = job_rank_zero()
        trial = sweep_trial()
        if trial:
            id, kwargs["group"] = trial[1], kwargs.get("group") or f"sweep-{trial[0]}"
            if rank_zero and not (run / ID_FILE).is_file():
                (run / ID_FILE).write_text(id + "\n")
            rank_zero_info(
                f"W&B sweep {trial[0]}: this run is the agent's trial {id}, named and grouped by it"
            )
        else:
            name = name or f"{run.resolve().parent.name}/{run.name}"
            id = id or run_id(run, create=rank_zero)
        # Only rank 0 starts the W&B run: the other ranks need not probe the service.
        reason = None if offline or not rank_zero else offline_reason()
        dropped = "; log_model is off" if reason and log_model else ""
        if reason:
            offline, log_model = True, False  # Lightning refuses log_model offline
        if rank_zero and (offline or os.environ.get("WANDB_MODE") in ("offline", "dryrun")):
            rank_zero_info(
                f"W&B offline{f' ({reason})' if reason else ''}: the run is kept in {run}/wandb; "
                f"upload it later with: wandb sync {run}/wandb/offline-run-*{dropped}"
            )
        super().__init__(
            *args, save_dir=save_dir, name=name, id=id, offline=offline, log_model=log_model, **kwargs
        )


def run_id(run: Path, create: bool) -> str | None:
    """The W&B run id kept in the run folder (made on first use), so a resume continues that run."""
    path = run / ID_FILE
    if path.is_file():
        return path.read_text().strip()
    if not create:
        return None
    made = secrets.token_hex(4)  # W&B ids: letters and digits
    path.write_text(made + "\n")
    return made


def sweep_trial() -> tuple[str, str] | None:
    """``(sweep id, run id)`` that a W&B sweep agent exports, whose run wandb then reports to, else None."""
    sweep, trial = os.environ.get("WANDB_SWEEP_ID"), os.environ.get("WANDB_RUN_ID")
    return (sweep, trial) if sweep and trial else None


def offline_reason() -> str | None:
    """Why W&B cannot go online here (not logged in, service unreachable), or None if it can."""
    if os.environ.get("WANDB_MODE"):
        return None
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    if not os.environ.get("WANDB_API_KEY") and not os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        try:
            if netrc.netrc().authenticators(host) is None:
                return "not logged in"
        except (OSError, netrc.NetrcParseError):
            return "not logged in"
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return f"{host} unreachable"
    return None
