"""Optional part: LitData shards on a local disk or in S3 (``--data StreamingDataModule``, ``app shard``).

Needs ``pip install ".[streaming]"``. To drop it: ``rm -r data/streaming tests/data/streaming
benchmarks/streaming.py`` and its line in ``data/__init__.py``.
"""

from data.streaming.datamodule import StreamingDataModule

__all__ = ["StreamingDataModule"]
