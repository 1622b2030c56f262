"""Per-class classification metrics: the macro averages logged at validation and test, and the
per-class figures of the test table."""

import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection
from torchmetrics.classification import MulticlassF1Score, MulticlassPrecision, MulticlassRecall

TOP_K = 5  # acc_top5 is logged only with more classes than this


class TopKAccuracy(Metric):
    """The fraction of samples whose class is among the ``k`` highest logits.

    torchmetrics' ``MulticlassAccuracy(top_k=k)`` gives the same value from one-hot (batch, classes)
    masks, at 3 to 6 times the cost per step here (``python -m benchmarks.metrics``).
    """

    full_state_update = False

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k
        self.add_state("correct", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", torch.tensor(0), dist_reduce_fx="sum")

    def update(self, logits: Tensor, target: Tensor) -> None:
        self.correct += (logits.topk(self.k, dim=1).indices == target[:, None]).sum()
        self.total += target.numel()

    def compute(self) -> Tensor:
        return self.correct / self.total


def macro_metrics(num_classes: int, prefix: str) -> MetricCollection:
    """``PREFIX/f1_macro``, ``precision_macro``, ``recall_macro`` (and ``acc_top5`` beyond 5 classes).

    The three macro scores are one compute group: after the first update, one set of per-class counts
    (true/false positives, false negatives) is updated per step and all three are read from it.
    Counts are summed over the ranks when computed, so the values do not depend on how the samples
    were split. Classes without samples or predictions are left out of the averages (torchmetrics').
    """
    metrics = {
        "f1_macro": MulticlassF1Score(num_classes, average="macro"),
        "precision_macro": MulticlassPrecision(num_classes, average="macro"),
        "recall_macro": MulticlassRecall(num_classes, average="macro"),
    }
    if num_classes > TOP_K:
        metrics["acc_top5"] = TopKAccuracy(TOP_K)
    return MetricCollection(metrics, prefix=f"{prefix}/", compute_groups=True)
