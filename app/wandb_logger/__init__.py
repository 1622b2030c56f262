"""Optional part: the default logger, Lightning's WandbLogger kept with the run folder (``logger.py``).

To drop it: ``rm -r app/wandb_logger tests/app/wandb_logger`` and its line in ``configs/defaults.yaml``;
runs then log with Lightning's default logger (TensorBoard), in the run folder too.
"""

from app.wandb_logger.logger import WandbLogger

__all__ = ["WandbLogger"]
