"""A StreamingDataModule that records which samples each training batch holds (the streaming tests)."""

import json
import os
from pathlib import Path
from typing import Any

from data.streaming import StreamingDataModule


class RecordingStreamingDataModule(StreamingDataModule):
    """:class:`StreamingDataModule` that appends ``{"epoch", "step", "indices"}`` of every training batch
    to ``$STREAMING_RECORD/rank{R}.jsonl`` before the indices are dropped from the batch."""

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        trainer = self.trainer
        if trainer is not None and trainer.training and isinstance(batch, tuple | list) and len(batch) == 3:
            line = {"epoch": trainer.current_epoch, "step": trainer.global_step, "indices": batch[2].tolist()}
            folder = Path(os.environ["STREAMING_RECORD"])
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / f"rank{trainer.global_rank}.jsonl", "a") as f:
                f.write(json.dumps(line) + "\n")
        return super().on_after_batch_transfer(batch, dataloader_idx)


def recorded(folder: Path, rank: int = 0) -> list[dict]:
    path = folder / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
