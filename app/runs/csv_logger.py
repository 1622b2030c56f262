"""Lightning's CSVLogger, made to append: a resumed run keeps the metrics it logged before."""

import csv
import io
import warnings
from pathlib import Path
from typing import Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter


# workaround: Lightning's CSVLogger deletes the metrics.csv it finds (2.6); gone when it appends
class AppendingCSVLogger(CSVLogger):
    """Lightning's CSVLogger, whose writer deletes the ``metrics.csv`` it finds (a resume's, a test's):
    its rows are put back, and its columns told."""

    def __init__(self, save_dir: str = ".", **kwargs: Any) -> None:
        # A default: the CLI puts it in the run folder, whatever the config says.
        super().__init__(save_dir, **kwargs)
        self.writer_made = False

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        path = Path(self.log_dir) / ExperimentWriter.NAME_METRICS_FILE
        before = path.read_text() if not self.writer_made and path.is_file() else None
        with warnings.catch_warnings():  # that the file will be deleted: not so here
            warnings.simplefilter("ignore")
            writer = super().experiment
        self.writer_made = True
        if before:
            path.write_text(before)
            writer.metrics_keys = next(csv.reader(io.StringIO(before)))
        return writer
