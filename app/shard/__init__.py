"""Optional part (streaming): ``python -m app shard``, the data's splits written as LitData shards."""

from lightning import LightningDataModule, LightningModule, Trainer

from data.streaming.writer import shard as write_shards


def shard(trainer: Trainer, model: LightningModule, datamodule: LightningDataModule, output: str) -> str:
    """Write the data's splits as LitData shards to ``output``, a folder or ``s3://bucket/prefix``, for
    ``--data StreamingDataModule --data.root OUTPUT``."""
    return write_shards(datamodule, output)
