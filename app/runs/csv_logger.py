"""Lightning's CSVLogger, made to append: a resumed run keeps the metrics it logged before."""

import csv

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter


class _AppendingWriter(ExperimentWriter):
    # Lightning's writer deletes metrics.csv when its folder is not empty; this one reads its columns.
    def _check_log_dir_exists(self) -> None:
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as f:
                self.metrics_keys = next(csv.reader(f), [])


class AppendingCSVLogger(CSVLogger):
    """Writes ``metrics.csv`` like Lightning's CSVLogger; an existing file is added to, not replaced.

    The CLI uses it wherever ``CSVLogger`` is asked for, since every command on a run (resume,
    test of its checkpoint) logs into that run's folder.
    """

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment
