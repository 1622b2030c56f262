"""``python -m benchmarks.metrics``: what the per-class metrics add to an evaluation step, in µs.

Times ``update`` on random logits (batch ``--batch-size``, 10 and 100 classes) of: the metrics a
validation step updated before (loss mean, accuracy), the macro scores of ``models/metrics.py``
(F1, precision and recall in one compute group, plus top-5 accuracy beyond 5 classes), the top-5
accuracy alone and torchmetrics' own, and ``PerClassTable``'s counts (test only); MnistCNN's
forward pass gives the scale. Each figure is the median over ``--rounds`` rounds of about
``--seconds`` each (calls counted until then), after a warm-up round, in CPU time of this process on
``--threads`` threads (default 1): on a shared machine, other jobs inflate wall-clock times.
"""

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy, MulticlassStatScores

from benchmarks.common import count
from models import MnistCNN
from models.metrics import TOP_K, TopKAccuracy, macro_metrics


def microseconds(step: Callable[[], object], rounds: int, seconds: float) -> float:
    """Median over ``rounds`` of the mean CPU time of one ``step()`` call, after a warm-up round."""
    times = []
    for _ in range(rounds + 1):
        calls, start = 0, time.process_time()
        while (elapsed := time.process_time() - start) < seconds:
            step()
            calls += 1
        times.append(elapsed / calls * 1e6)
    return statistics.median(times[1:])


def steps(classes: int, batch_size: int) -> dict[str, Callable[[], object]]:
    """The timed calls, by name, on one batch of random logits over ``classes``."""
    logits, target = torch.randn(batch_size, classes), torch.randint(0, classes, (batch_size,))
    loss, accuracy = MeanMetric(), MulticlassAccuracy(classes, average="micro")
    scores, top5 = macro_metrics(classes, "val"), TopKAccuracy(TOP_K)
    their_top5 = MulticlassAccuracy(classes, top_k=TOP_K, average="micro")
    counts = MulticlassStatScores(classes, average=None)

    def before() -> None:
        loss.update(logits[0, 0], weight=batch_size)
        accuracy.update(logits, target)

    timed = {
        "loss + accuracy (before)": before,
        "macro scores + top-5 (added)": lambda: scores.update(logits, target),
        "top-5 accuracy alone": lambda: top5.update(logits, target),
        "torchmetrics' top-5 (not used)": lambda: their_top5.update(logits, target),
        "per-class counts (test only)": lambda: counts.update(logits.argmax(1), target),
    }
    if classes == 10:
        net, images = MnistCNN().eval(), torch.randn(batch_size, 1, 28, 28)
        timed["MnistCNN forward (for scale)"] = torch.no_grad()(lambda: net(images))
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--rounds", type=count, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), batch {args.batch_size}: µs of CPU per step"
    )
    for classes in (10, 100):
        for name, step in steps(classes, args.batch_size).items():
            print(f"  {classes:>3} classes  {name:<32} {microseconds(step, args.rounds, args.seconds):>7.0f}")


if __name__ == "__main__":
    main()
