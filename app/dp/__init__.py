"""Optional part: ``--trainer.strategy dp`` (torch's DataParallel, which Lightning 2 removed).

To drop it: ``rm -r app/dp tests/app/dp`` and its line in ``app/trainer.py``.
"""

from app.dp.strategy import DataParallelStrategy

__all__ = ["DataParallelStrategy"]
