"""What an lr range test leaves in the run folder: the loss against the lr, as a plot and as a table."""

from pathlib import Path

from lightning import Trainer
from matplotlib.figure import Figure

from app.runs import folder
from app.runs.folder import run_folder


def write(trainer: Trainer, finder) -> list[Path]:
    """Write ``lr_find.png`` (the suggestion marked) and ``lr_find.csv`` (lr, smoothed loss) to the run
    folder; the paths written. ``finder``: what ``Tuner.lr_find`` returned."""
    run = run_folder(trainer)
    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    finder.plot(suggest=True, ax=axes)
    axes.set_title("lr range test (smoothed training loss)")
    png = folder.unused(run / "lr_find.png")
    figure.savefig(png, bbox_inches="tight")
    rows = zip(finder.results["lr"], finder.results["loss"], strict=True)
    return [png, folder.write_csv(run / "lr_find.csv", ["lr", "loss"], rows)]
