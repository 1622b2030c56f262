"""k-fold cross-validation: which samples of a training split are fold I, stratified by class."""

import torch
from torch import Tensor


def check_folds(folds: int | None, fold: int | None) -> None:
    """Raise ``ValueError`` (one line, naming the flags) where ``folds``/``fold`` pick no fold."""
    if folds is None and fold is None:
        return
    if folds is None:
        raise ValueError(f"--data.fold {fold} needs --data.folds K, the number of folds (2 or more)")
    if folds < 2:
        raise ValueError(f"--data.folds {folds}: cross-validation needs 2 or more folds")
    if fold is None:
        raise ValueError(
            f"--data.folds {folds} needs --data.fold I, the fold to validate on (0 to {folds - 1})"
        )
    if not 0 <= fold < folds:
        raise ValueError(f"--data.fold {fold} is not a fold of {folds}: pass 0 to {folds - 1}")


def fold_indices(labels: Tensor, folds: int, fold: int, seed: int) -> tuple[list[int], list[int]]:
    """The train and validation indices (each ascending) of fold ``fold`` of ``folds`` over ``labels``.

    Each class's samples, in an order drawn by ``seed``, are dealt to the folds in turn, the deal going
    on from one class to the next: every class's count differs by at most one between folds, and so
    does every fold's size. The result depends only on ``labels``, ``folds``, ``fold`` and ``seed``
    (never on the number of processes), and the ``folds`` validation sets cover the split once.
    """
    check_folds(folds, fold)
    labels = torch.as_tensor(labels).reshape(-1)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    # A stable sort keeps each class's drawn order: the samples grouped by class, shuffled within it.
    by_class = order[torch.sort(labels[order], stable=True).indices]
    position = torch.empty_like(by_class)
    position[by_class] = torch.arange(len(by_class))
    in_fold = position % folds == fold
    return torch.nonzero(~in_fold).flatten().tolist(), torch.nonzero(in_fold).flatten().tolist()
