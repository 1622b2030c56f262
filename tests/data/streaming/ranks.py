"""One rank of a gloo job that iterates a StreamingDataModule's train loader for some epochs and saves
the sample indices of each batch: ``python ranks.py ROOT OUT BATCH WORKERS EPOCHS`` under torchrun."""

import json
import sys
from pathlib import Path

import torch.distributed as dist

from data.streaming import StreamingDataModule


def main(root: str, out: str, batch: int, workers: int, epochs: int) -> None:
    dist.init_process_group("gloo")
    data = StreamingDataModule(root, batch_size=batch, num_workers=workers, seed=7)
    loader = data.train_dataloader()
    seen = [[batch[2].tolist() for batch in loader] for _ in range(epochs)]
    path = Path(out, f"rank{dist.get_rank()}.json")
    path.write_text(json.dumps({"epochs": seen, "length": len(loader)}))
    dist.barrier()  # no rank may leave while another still iterates
    dist.destroy_process_group()


if __name__ == "__main__":
    root, out, batch, workers, epochs = sys.argv[1:]
    main(root, out, int(batch), int(workers), int(epochs))
