"""Lightning's WandbLogger, keeping its W&B run with the run folder, online only where it can be."""

import netrc
import os
import secrets
import socket
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger
from lightning.pytorch.utilities import rank_zero_info

from app.runs.folder import job_rank_zero

ID_FILE = "wandb-id"
# The options below passed to wandb.init where given: unset, wandb's own defaults hold.
# workaround: jsonargparse imports wandb at every start for **kwargs (4.52); gone when it does so lazily
WANDB_INIT = ("entity", "notes", "tags", "config", "config_exclude_keys", "config_include_keys")
WANDB_INIT += ("allow_val_change", "group", "job_type", "mode", "force", "reinit", "resume", "resume_from")
WANDB_INIT += ("fork_from", "save_code", "tensorboard", "sync_tensorboard", "monitor_gym", "settings")


class WandbLogger(LightningWandbLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.WandbLogger`, the default logger, for run folders.

    - Its id is kept in ``SAVE_DIR/wandb-id``: every command on a run folder continues that W&B run,
      named ``NAME/version_N``.
    - Offline, in one line with the ``wandb sync`` command, where it cannot be online (``WANDB_MODE`` wins).
    - Under a W&B sweep agent, the run is the trial the agent started, grouped by its sweep.

    Its options are Lightning's and ``wandb.init``'s, named here rather than passed on as ``**kwargs``,
    which jsonargparse resolves to ``wandb.init``'s by importing wandb at every command's start,
    ``--help`` included. An option of ``wandb.init``'s left unset is not passed on.

    Args:
        experiment: A W&B run already started, from Python only.
        entity: The W&B user or team whose project the run goes to (default: your default entity).
        notes: A longer description of the run.
        tags: Labels shown with the run in W&B's tables.
        config: Values added to the run's config besides the CLI's own: a dict, or a YAML file's path.
        config_exclude_keys: Keys of ``config`` left out.
        config_include_keys: The only keys of ``config`` kept.
        allow_val_change: Whether a later update of the run's config may change a value.
        group: The group of runs this one is shown in (a sweep's trials: ``sweep-ID`` unless given).
        job_type: What the run does within its group, e.g. ``train`` or ``eval``.
        mode: ``online``, ``offline``, ``disabled`` or ``shared`` (``WANDB_MODE`` sets it too).
        force: Refuse to start a run unless logged in to W&B.
        reinit: What starting a run does to one already running in this process.
        resume: Whether ``id`` must, may or must not name an existing run (unset: Lightning's ``allow``).
        resume_from: ``RUN_ID?_step=N``: that run from step N on, its later history dropped.
        fork_from: ``RUN_ID?_step=N``: a new run, starting from that run's step N.
        save_code: Upload the program's main file with the run.
        tensorboard: W&B's older name of ``sync_tensorboard``.
        sync_tensorboard: Upload TensorBoard's event files with the run.
        monitor_gym: Log videos of a Gym environment.
        settings: W&B's further settings, as a dict of ``wandb.Settings`` fields.
    """

    def __init__(
        self,
        *,
        save_dir: str = ".",
        name: str | None = None,
        id: str | None = None,
        offline: bool = False,
        log_model: bool | Literal["all"] = False,
        version: str | None = None,
        dir: str | None = None,
        anonymous: bool | None = None,
        project: str | None = None,
        experiment: Any = None,
        prefix: str = "",
        checkpoint_name: str | None = None,
        add_file_policy: Literal["mutable", "immutable"] = "mutable",
        entity: str | None = None,
        notes: str | None = None,
        tags: list[str] | None = None,
        config: dict[str, Any] | str | None = None,
        config_exclude_keys: list[str] | None = None,
        config_include_keys: list[str] | None = None,
        allow_val_change: bool | None = None,
        group: str | None = None,
        job_type: str | None = None,
        mode: Literal["online", "offline", "disabled", "shared"] | None = None,
        force: bool | None = None,
        reinit: bool | Literal["default", "return_previous", "finish_previous", "create_new"] | None = None,
        resume: bool | Literal["allow", "never", "must", "auto"] | None = None,
        resume_from: str | None = None,
        fork_from: str | None = None,
        save_code: bool | None = None,
        tensorboard: bool | None = None,
        sync_tensorboard: bool | None = None,
        monitor_gym: bool | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        run = Path(save_dir)
        rank_zero = job_rank_zero()
        trial = sweep_trial()
        if trial:
            id, group = trial[1], group or f"sweep-{trial[0]}"
            if rank_zero and not (run / ID_FILE).is_file():
                (run / ID_FILE).write_text(id + "\n")
            rank_zero_info(
                f"W&B sweep {trial[0]}: this run is the agent's trial {id}, named and grouped by it"
            )
        else:
            name = name or f"{run.resolve().parent.name}/{run.name}"
            id = id or run_id(run, create=rank_zero)
        # Only rank 0 starts the W&B run: the other ranks need not probe the service.
        reason = None if offline or mode or not rank_zero else offline_reason()
        dropped = "; log_model is off" if reason and log_model else ""
        if reason:
            offline, log_model = True, False  # Lightning refuses log_model offline
        if rank_zero and (offline or (mode or os.environ.get("WANDB_MODE")) in ("offline", "dryrun")):
            rank_zero_info(
                f"W&B offline{f' ({reason})' if reason else ''}: the run is kept in {run}/wandb; "
                f"upload it later with: wandb sync {run}/wandb/offline-run-*{dropped}"
            )
        given = locals()  # the wandb.init options, as given (group: a sweep's, where unset)
        init = {key: given[key] for key in WANDB_INIT if given[key] is not None}
        super().__init__(
            save_dir=save_dir,
            name=name,
            id=id,
            project=project,
            offline=offline,
            log_model=log_model,
            version=version,
            dir=dir,
            anonymous=anonymous,
            experiment=experiment,
            prefix=prefix,
            checkpoint_name=checkpoint_name,
            add_file_policy=add_file_policy,
            **init,
        )

    @property
    def experiment(self) -> Any:
        """Lightning's W&B run, started on first use (by rank 0 only)."""
        if job_rank_zero():
            # wandb.init imports W&B's public API some 15 imports deep, and on Python < 3.13 pydantic looks
            # for its generic models' source in every frame, scanning sys.modules for each of importlib's
            # (python/cpython#92041): 0.6 s of a fit's start beside torch's ~4,000 modules. Imported first
            # from here, the chain is short: 0.1 s (benchmarks/README.md, start-up).
            # workaround: python/cpython#92041 with wandb/wandb#10898; gone when Python >= 3.13 is the floor
            import wandb.apis.public  # noqa: F401
        return super().experiment


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
