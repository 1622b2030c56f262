"""Optional part: ``--trainer.strategy dp`` (torch's DataParallel, which Lightning 2 removed).

To drop it: ``rm -r app/dp tests/app/dp`` and its line in ``app/process.py``.
"""

from app.dp.strategy import DataParallelStrategy, register

__all__ = ["DataParallelStrategy", "register"]
