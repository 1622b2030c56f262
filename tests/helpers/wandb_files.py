"""Reading back what an offline W&B run wrote: the records of its ``.wandb`` file."""

import struct
from pathlib import Path


def records(path: Path) -> list:
    """The records of a ``.wandb`` file: a LevelDB-style log (32 kB blocks of framed chunks)."""
    # Imported here, not where the test modules that import this are collected (W&B: 0.6 s a process).
    from wandb.proto import wandb_internal_pb2

    data, block, position, pending, found = path.read_bytes(), 32768, 7, b"", []
    assert data[:4] == b":W&B"
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a header is padding
            position += block - position % block
            continue
        length, kind = struct.unpack("<HB", data[position + 4 : position + 7])
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
            pending = b""
        elif kind == 0:
            break
    return found
