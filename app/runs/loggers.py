"""Point the chosen loggers at the run folder; W&B goes offline by itself when it cannot be online, and
under a W&B sweep agent the run is the trial the agent started."""

import netrc
import os
import secrets
import socket
from pathlib import Path
from urllib.parse import urlparse

from jsonargparse import Namespace
from lightning.pytorch.utilities import rank_zero_info

WANDB_ID_FILE = "wandb-id"


def _loggers(value: object) -> list[Namespace]:
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, Namespace) and item.get("class_path")]


def wandb_offline_reason() -> str | None:
    """Why W&B cannot go online here (not logged in, service unreachable), or None if it can.

    ``WANDB_MODE``, when set, is the user's choice and is left to W&B.
    """
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


def wandb_id(run: Path, create: bool) -> str | None:
    """The W&B run id kept in the run folder (made on first use), so a resume continues that run."""
    path = run / WANDB_ID_FILE
    if path.is_file():
        return path.read_text().strip()
    if not create:
        return None
    run_id = secrets.token_hex(4)  # W&B ids: letters and digits
    path.write_text(run_id + "\n")
    return run_id


def keep_trial_id(run: Path, sweep: str, run_id: str, rank_zero: bool) -> None:
    """Record the agent's run id as the run folder's W&B id, so a resume of the folder continues it."""
    if not rank_zero:
        return
    path = run / WANDB_ID_FILE
    if not path.is_file():
        path.write_text(run_id + "\n")
    rank_zero_info(f"W&B sweep {sweep}: this run is the agent's trial {run_id}, named and grouped by it")


def sweep_trial() -> tuple[str, str] | None:
    """``(sweep id, run id)`` when a W&B sweep agent started this job, else None.

    The agent exports both (``WANDB_SWEEP_ID``, ``WANDB_RUN_ID``) and expects the run it created to
    report; wandb itself then ignores any other id, project or entity given to ``wandb.init``.
    """
    sweep, run_id = os.environ.get("WANDB_SWEEP_ID"), os.environ.get("WANDB_RUN_ID")
    return (sweep, run_id) if sweep and run_id else None


def configure(logger_config: object, run: Path, name: str, rank_zero: bool) -> list[str]:
    """Fill in each logger's folder (and W&B's run id, name and mode) for ``run``, in place.

    Returns:
        Lines for the user, to print once the run's classes are built (before that, a bad flag ends
        the command and the run folder they name is removed).
    """
    notes = []
    trial = sweep_trial()
    for logger in _loggers(logger_config):
        if logger.get("init_args") is None:
            logger.init_args = Namespace()
        args = logger.init_args
        kind = logger.class_path.rsplit(".", 1)[-1]
        if kind == "WandbLogger":  # ours (app.runs.wandb_logger) or Lightning's: the same arguments
            args.save_dir = str(run)
            if trial:
                keep_trial_id(run, *trial, rank_zero)
                # The sweep names its runs; grouping by it keeps its trials together in the runs table.
                args.id, args.group = trial[1], args.get("group") or f"sweep-{trial[0]}"
            else:
                args.name = args.get("name") or f"{name}/{run.name}"
                args.id = args.get("id") or wandb_id(run, create=rank_zero)
            # Only rank 0 starts the W&B run: the other ranks need not probe the service.
            reason = None if args.get("offline") or not rank_zero else wandb_offline_reason()
            dropped = ""
            if reason:
                # Lightning refuses log_model offline; the checkpoints stay in the run folder.
                dropped = "; log_model is off" if args.get("log_model") else ""
                args.offline, args.log_model = True, False
            if rank_zero and (args.get("offline") or os.environ.get("WANDB_MODE") in ("offline", "dryrun")):
                why = f" ({reason})" if reason else ""
                notes.append(
                    f"W&B offline{why}: the run is kept in {run}/wandb; "
                    f"upload it later with: wandb sync {run}/wandb/offline-run-*{dropped}"
                )
        elif kind in ("CSVLogger", "AppendingCSVLogger", "TensorBoardLogger"):
            # Their log_dir is then the run folder itself, where config.yaml goes too.
            args.save_dir, args.name, args.version = str(run), "", ""
            if kind == "CSVLogger" and rank_zero and (run / "metrics.csv").is_file():
                notes.append(
                    f"Lightning's CSVLogger starts {run}/metrics.csv afresh: the rows logged before are "
                    "dropped (--trainer.logger AppendingCSVLogger adds to them)"
                )
    return notes
