"""Lightning's CSVLogger, made to append: a resumed run keeps the metrics it logged before."""

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from app import internals


class AppendingCSVLogger(CSVLogger):
    """Writes ``metrics.csv`` like Lightning's CSVLogger; an existing file is added to, not replaced.

    Every command on a run (a resume, a test of its checkpoint) logs into that run's folder: with
    Lightning's ``CSVLogger`` each one would start the file afresh.
    """

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        return internals.appending_csv_writer(self)
