"""The study in its storage: SQLite by default, a journal file on a shared file system, or PostgreSQL.

Several ``tune`` processes (on one machine or many) share one study and finish exactly the trials asked
for: each trial claims a number from the storage, a number past the count is never run. A trial whose
tune process is gone (its pid dead on this machine, or its heartbeat silent for ``GRACE`` seconds) is
failed by whichever process sees it first (the storage lets only one) and queued again with the same
values, to resume from its ``last.ckpt``.
"""

import abc
import random
import socket
import threading
import time
from pathlib import Path

import optuna
from optuna.exceptions import StorageInternalError, UpdateFinishedTrialError
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, ProgrammingError

from app.errors import UsageError
from app.tune.report import alive

HEARTBEAT = 10  # seconds between a running trial's heartbeats
GRACE = 6 * HEARTBEAT  # without a heartbeat this long, a trial's tune process is taken for dead
HOST, BEAT, PID = "tune:host", "tune:heartbeat", "tune:pid"
CHANNELS = ".channels"  # in the study folder: each fit's reports, verdicts and result, apart from its run
RUN, RESUMES, SURPLUS, ERROR = "run", "resumes", "surplus", "error"  # trials' user attributes


def open_storage(url: str | None, folder: Path, timeout: float = 10) -> BaseStorage:
    """The storage at ``url`` (None: ``folder/study.db``); one ``error:`` line where it cannot be reached.

    ``url``: an SQLAlchemy URL (``sqlite:///PATH``, ``postgresql://USER:PASSWORD@HOST/DB``) or a journal
    file (``PATH.log``, or ``journal:PATH``) on a file system every machine sees.
    """
    url = url or f"sqlite:///{folder / 'study.db'}"
    if url.startswith("journal:") or url.endswith(".log"):
        path = Path(url.removeprefix("journal:"))
        if not path.parent.is_dir():
            raise UsageError(f"--tune.storage {url}: the folder {path.parent} does not exist")
        return Patient(JournalStorage(JournalFileBackend(str(path))), str(path))
    options = {"connect_args": {"connect_timeout": int(timeout)}} if url.startswith("postgres") else {}
    try:
        return Patient(created(url, options), hidden(url))
    except ImportError:
        raise UsageError(
            f"--tune.storage {url.split(':', 1)[0]}://...: its database driver is not installed; "
            "pip install -e '.[tune]' (PostgreSQL: psycopg)"
        ) from None
    except Exception as err:  # SQLAlchemy's errors: a refused, unknown or unreachable server
        reason = " ".join(str(getattr(err, "orig", None) or err).split())
        raise UsageError(f"--tune.storage {hidden(url)}: cannot open it ({reason[:300]})") from None


class StorageGone(UsageError):
    """The study's storage did not answer for ``GRACE`` seconds."""


# A database restarting or out of reach, a file system away: tried again (a refused write is no such).
UNREACHED = (StorageInternalError, OperationalError, InterfaceError, OSError)


class Patient(BaseStorage):
    """``storage`` with each call tried again while the storage cannot be reached, for up to ``GRACE``
    seconds (then :class:`StorageGone`).

    Optuna's storage classes are used where a trial's heartbeat needs them (its attributes set by trial id),
    its study API elsewhere; both go through this one.
    """

    def __init__(self, storage: BaseStorage, where: str) -> None:
        self.storage, self.where = storage, where


def patient(name: str):
    def call(self: Patient, *args, **kwargs):
        deadline, wait = time.monotonic() + GRACE, 0.5
        while True:
            try:
                return getattr(self.storage, name)(*args, **kwargs)
            except UNREACHED:
                if time.monotonic() > deadline:
                    raise StorageGone(
                        f"the study's storage {self.where} did not answer for {GRACE} s; run the same "
                        "command again once it is back (the study resumes)"
                    ) from None
                time.sleep(wait)
                wait = min(2 * wait, HEARTBEAT / 2)

    return call


for _name in [n for n in dir(BaseStorage) if not n.startswith("_")]:
    setattr(Patient, _name, patient(_name))
abc.update_abstractmethods(Patient)


# workaround: optuna issue 1092; gone when concurrent RDBStorage creation is safe
def created(url: str, options: dict) -> RDBStorage:
    """``RDBStorage(url)``, tried again where other processes were creating a new database's tables too.

    Each creates the tables it finds missing, and those at the same time collide (optuna issue 1092;
    in SQLite as an OperationalError): the first made them, so the others' next try finds them.
    """
    sqlite = (OperationalError,) if url.startswith("sqlite") else ()  # elsewhere: a server out of reach
    for wait in (1.0, 2.0, 4.0):
        try:
            return RDBStorage(url, engine_kwargs=options)
        except (IntegrityError, ProgrammingError, *sqlite):
            time.sleep(wait * (1 + random.random()))
    return RDBStorage(url, engine_kwargs=options)


def hidden(url: str) -> str:
    """``url`` without its password."""
    head, at, tail = url.rpartition("@")
    return f"{head.rsplit(':', 1)[0]}:***@{tail}" if at and head.count(":") >= 2 else url


def sqlite_elsewhere(storage: BaseStorage, study: optuna.Study) -> str | None:
    """The other machine whose tune process runs a trial of this SQLite study, if any."""
    inner = storage.storage if isinstance(storage, Patient) else storage
    if not (isinstance(inner, RDBStorage) and inner.url.startswith("sqlite")):
        return None
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        host = trial.system_attrs.get(HOST)
        if host and host != socket.gethostname() and time.time() - trial.system_attrs.get(BEAT, 0) < GRACE:
            return host
    return None


def fresh(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The trials that count towards the number asked for: not a resume, not drawn past the count."""
    return [t for t in trials if RESUMES not in t.user_attrs and not t.user_attrs.get(SURPLUS)]


def past_count(study: optuna.Study, trial: optuna.Trial, count: int) -> bool:
    """Whether ``trial`` is beyond the ``count`` asked for (drawn by two processes at once)."""
    if RESUMES in trial.user_attrs:
        return False
    numbers = sorted(t.number for t in fresh(study.get_trials(deepcopy=False)))
    return trial.number not in numbers[:count]


class Watch:
    """Takes a RUNNING trial's tune process for gone: its pid dead on this machine, or its heartbeat's mark
    unchanged in the storage for ``GRACE`` seconds of this process's clock (no two machines' clocks are
    compared). A trial first seen now is watched from now."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[object, float]] = {}  # trial number -> (its mark, when it was first seen)

    def dead(self, trial: FrozenTrial) -> bool:
        attrs, now = trial.system_attrs, time.monotonic()
        if attrs.get(HOST) == socket.gethostname() and PID in attrs and not alive(attrs[PID]):
            return True
        mark = (attrs.get(HOST), attrs.get(PID), attrs.get(BEAT))  # all None: claimed, not yet marked
        if trial.number not in self.seen or self.seen[trial.number][0] != mark:
            self.seen[trial.number] = (mark, now)
        return now - self.seen[trial.number][1] > GRACE


def take_over(study: optuna.Study, storage: BaseStorage, watch: Watch) -> list[int]:
    """Queue again every RUNNING trial whose tune process is gone; returns their numbers."""
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    gone = [t for t in running if watch.dead(t)]
    why = "its tune process ended; queued to resume"
    return [t.number for t in gone if requeue(study, storage, t, why)]


class Heartbeat:
    """Marks a running trial with this machine, this process and the time, every ``HEARTBEAT`` seconds.

    ``taken`` is set once another process failed the trial (taken over, this one's beats late), ``lost``
    once no beat reached the storage for ``GRACE`` seconds (others take the trial for dead then).
    """

    def __init__(self, study: optuna.Study, storage: BaseStorage, number: int, pid: int) -> None:
        study_id = storage.get_study_id_from_name(study.study_name)
        self.storage, self.trial_id = (
            storage,
            storage.get_trial_id_from_study_id_trial_number(study_id, number),
        )
        storage.set_trial_system_attr(self.trial_id, HOST, socket.gethostname())
        storage.set_trial_system_attr(self.trial_id, PID, pid)
        storage.set_trial_system_attr(self.trial_id, BEAT, time.time())
        self.done, self.taken, self.lost = threading.Event(), threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.beat, daemon=True)
        self.thread.start()

    def beat(self) -> None:
        while not self.done.wait(HEARTBEAT):
            try:
                self.storage.set_trial_system_attr(self.trial_id, BEAT, time.time())
            except UpdateFinishedTrialError:
                self.taken.set()
                return
            except StorageGone:
                self.lost.set()
                return

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def requeue(study: optuna.Study, storage: BaseStorage, trial: FrozenTrial, why: str) -> bool:
    """Fail the RUNNING ``trial`` and queue it again (same values, same run folder), unless another
    process did first; returns whether this one did."""
    trial_id = storage.get_trial_id_from_study_id_trial_number(
        storage.get_study_id_from_name(study.study_name), trial.number
    )
    try:
        storage.set_trial_user_attr(trial_id, ERROR, why)  # a finished trial takes no attribute
        if not storage.set_trial_state_values(trial_id, TrialState.FAIL):
            return False
    except UpdateFinishedTrialError:
        return False
    origin = trial.user_attrs.get(RESUMES, trial.number)
    study.enqueue_trial(trial.params, user_attrs={RUN: trial.user_attrs.get(RUN), RESUMES: origin})
    return True
