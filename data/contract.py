"""What the app reads from a DataModule: the one contract between ``data/`` and ``app/``."""

import json
from collections.abc import Sequence
from typing import Any, Protocol


class ClassificationData(Protocol):
    """The attributes the CLI, its callbacks and ``export`` read; every DataModule here has them all.

    A DataModule of your own needs ``num_classes``, ``in_channels`` and ``image_size`` (linked to the
    network); each other attribute only turns on what it feeds, and its absence turns that off.
    """

    num_classes: int  # the network's outputs
    in_channels: int  # the network's input channels; the shape of exported models and summaries
    image_size: int  # the side of the square images the network takes
    resize_size: int  # evaluation: an image's short side is resized to it, then its centre image_size taken
    batch_size: int  # per device: the start line and the progress bar's images/s
    mean: Sequence[float]  # per channel, to show normalized images in the validation pictures
    std: Sequence[float]
    class_names: Sequence[str]  # by label: pictures and predictions.csv
    predict_id_name: str  # the first column of predictions.csv ("index", "file")
    has_test_split: bool  # False: fit ends without its test (an image folder without test/)

    def predict_id(self, index: int) -> int | str:
        """What names sample ``index`` of the predict set in predictions.csv."""

    def fingerprint(self) -> str | None:
        """A short digest of the data files read, recorded with each run (None: not known)."""

    def check_test_split(self) -> None:
        """Raise ``DataError`` where the test split does not fit the training split (an image folder's
        test/ with other classes). Fit calls it before training; it must not need ``prepare_data``."""


# Its attributes and its methods.
PARTS = {*ClassificationData.__annotations__, *(n for n in vars(ClassificationData) if not n.startswith("_"))}


def provided(datamodule: Any, name: str, default: Any = None) -> Any:
    """``datamodule.NAME`` for a part of :class:`ClassificationData`, or ``default`` where it lacks it."""
    if name not in PARTS:
        raise AttributeError(f"{name} is not part of ClassificationData")
    return getattr(datamodule, name, default)


CARD = ("class_names", "num_classes", "in_channels", "image_size", "resize_size", "mean", "std")


def card(datamodule: Any) -> dict[str, Any]:
    """What a trained network needs to know of its data, as plain values: class names, input shape,
    resizing and normalization (the parts ``datamodule`` provides). Checkpoints and exports carry it."""
    found = {name: provided(datamodule, name) for name in CARD}
    # Through JSON: plain ints, floats, strings and lists (a checkpoint's weights-only loading refuses
    # other types, such as the parser's PositiveInt).
    return json.loads(json.dumps({k: v for k, v in found.items() if v is not None}))
