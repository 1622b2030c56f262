"""The macro metrics against a hand computation."""

import pytest
import torch
from torch.nn import functional as F
from torchmetrics.classification import MulticlassAccuracy

from models.metrics import TopKAccuracy, macro_metrics

# 5 classes: class 3 is never predicted (precision 0/0), class 4 has neither samples nor predictions.
TARGET = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
PREDS = torch.tensor([0, 0, 1, 1, 1, 2, 2, 0, 2, 2])
# By hand: class 0 tp 2 fp 1 fn 1; class 1 tp 2 fp 1 fn 1; class 2 tp 1 fp 3 fn 1; class 3 tp 0 fp 0 fn 2.


def test_macro_scores_match_the_hand_computation():
    scores = macro_metrics(5, "val")
    for half in (slice(0, 4), slice(4, None)):  # two steps, one set of counts for all three
        scores.update(F.one_hot(PREDS[half], 5).float(), TARGET[half])
    assert len(scores.compute_groups) == 1
    # Macro: the mean over the 4 classes that have samples or predictions (class 4 is left out).
    assert scores.compute() == pytest.approx(
        {"val/precision_macro": 19 / 48, "val/recall_macro": 11 / 24, "val/f1_macro": 5 / 12}
    )


def test_top5_accuracy_only_beyond_five_classes():
    assert list(macro_metrics(5, "x").keys()) == ["x/f1_macro", "x/precision_macro", "x/recall_macro"]
    scores = macro_metrics(6, "x")
    logits = torch.tensor([[6.0, 5, 4, 3, 2, 1], [6.0, 5, 4, 3, 2, 1]])
    scores.update(logits, torch.tensor([4, 5]))  # ranked 5th (counted) and 6th (missed)
    assert scores.compute()["x/acc_top5"] == pytest.approx(0.5)


def test_top5_accuracy_is_torchmetrics_top5_micro_accuracy():
    logits, target = torch.randn(300, 20, generator=torch.Generator().manual_seed(0)), torch.arange(300) % 20
    ours, theirs = TopKAccuracy(5), MulticlassAccuracy(20, top_k=5, average="micro")
    for part in (slice(0, 128), slice(128, None)):
        ours.update(logits[part], target[part])
        theirs.update(logits[part], target[part])
    assert ours.compute() == pytest.approx(theirs.compute().item())
