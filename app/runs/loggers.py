"""Point the chosen loggers, whichever they are, at the run folder."""

from pathlib import Path

from jsonargparse import Namespace
from lightning.fabric.loggers import Logger

from app.parser import class_defaults, class_path_type

BASE_ROOT_DIR = Logger.root_dir  # what a logger has that does not nest its files


def configure(logger_config: object, run: Path) -> None:
    """Make every logger of ``logger_config`` (the parsed ``trainer.logger``) write into ``run``, in place.

    A logger that takes a ``save_dir`` gets ``run``. One that nests its files as ``save_dir/name/version``
    (as Lightning's CSV and TensorBoard loggers do, which define ``root_dir`` for that folder) writes them
    into ``run`` itself, where ``config.yaml`` and the checkpoints are.
    """
    for logger in logger_config if isinstance(logger_config, list) else [logger_config]:
        if not (isinstance(logger, Namespace) and logger.get("class_path")):
            continue  # True, False or None: Lightning's default logger, or none
        args = logger.init_args = logger.get("init_args") or Namespace()
        if "save_dir" in class_defaults(logger.class_path):
            args.save_dir = str(run)
        if getattr(class_path_type(logger.class_path), "root_dir", BASE_ROOT_DIR) is not BASE_ROOT_DIR:
            args.name, args.version = "", ""
