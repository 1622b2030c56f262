"""What a logging step reads on the host: every wanted tensor in one copy, each receiver its values."""

import math

import torch

from models.log_step_read import LogStepRead


def test_each_receiver_gets_its_own_values_in_order_and_the_next_read_starts_empty():
    read, got = LogStepRead(), []
    read.want(torch.tensor(0.25), lambda values: got.append(("loss", values)))
    read.want(torch.tensor([3, 2**62]), lambda values: got.append(("steps", values)))
    read.want(torch.tensor([[math.nan]]), lambda values: got.append(("bad", values)))
    assert got == []  # nothing is read before read()
    read.read()
    assert got[:2] == [("loss", [0.25]), ("steps", [3.0, 2.0**62])]  # integers up to 2**62 kept exactly
    assert got[2][0] == "bad" and math.isnan(got[2][1][0])
    read.read()
    assert len(got) == 3  # nothing left to read
