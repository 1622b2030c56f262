"""What the CLI changes in its own process when it starts; importing any module here changes nothing."""

import importlib
import logging
import warnings

from app.allocator import keep_freed_memory

# Lightning's console lines that are noise in this template, each silenced for one reason.
QUIET = (
    # An advert printed by every command.
    "💡 Tip: For seamless cloud logging",
    # Our defaults list a RichModelSummary on purpose.
    "Trainer already configured with model summary callbacks",
    # An implementation detail of the lr schedule's length.
    "Loading `train_dataloader` to estimate number of stepping batches",
)


class _DropLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(QUIET)


def prepare() -> None:
    """Tune the allocator, register ``--trainer.strategy dp``, and quiet what is not ours to show."""
    keep_freed_memory()
    importlib.import_module("app.dp").register()  # optional part: app/dp/
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropLines())
    # Lightning 2.6 on torch >= 2.10 warns about its own use of a torch internal; nothing for users to do.
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    # A resumed run logs into its own folder again: Lightning's warnings about a non-empty folder are moot.
    warnings.filterwarnings("ignore", message=r"Experiment logs directory .* exists and is not empty")
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    # An epoch shorter than log_every_n_steps still logs train/loss at its end (ImageClassifier).
    warnings.filterwarnings("ignore", message=r"The number of training batches \(\d+\) is smaller")
    # torchdata's StatefulDataLoader calls a torch function torch has deprecated; nothing for users to do.
    warnings.filterwarnings("ignore", message=r"'set_vital' is deprecated")
