"""DataModules over torchvision's downloadable data sets (MNIST family, CIFAR)."""

from pathlib import Path
from urllib.error import URLError

from torch.utils.data import Dataset

from data.vision import DatasetNotFoundError, VisionDataModule


class TorchvisionDataModule(VisionDataModule):
    """A data set read by a torchvision class that takes ``(root, train, download)``.

    Args:
        root: folder holding torchvision's layout (e.g. ``ROOT/MNIST/raw/...``).
        download: fetch the files into ``root`` if missing (once, on one process per node).
        batch_size: samples per batch per device.
        num_workers: loader worker processes per device; None picks from the cores per device.
        val_size: training samples held out for validation (an int), or a fraction.
        seed: seed of the train/val split.
    """

    dataset_class: type
    name: str

    def __init__(
        self,
        root: str = "datasets",
        download: bool = True,
        batch_size: int = 128,
        num_workers: int | None = None,
        val_size: int | float = 5000,
        seed: int = 42,
    ) -> None:
        super().__init__(root, batch_size, num_workers, val_size, seed)
        self.download = download

    @property
    def data_dir(self) -> Path:
        """Where the files must be."""
        raise NotImplementedError

    def prepare_data(self) -> None:
        for train in (True, False):
            self.open(train, download=self.download)

    def load(self, train: bool) -> Dataset:
        return self.open(train, download=False)

    def open(self, train: bool, download: bool) -> Dataset:
        """Read the split, downloading it first if asked; one clear error if impossible."""
        try:
            return self.dataset_class(self.root, train=train, download=download)
        except (RuntimeError, URLError, OSError) as err:
            why = f"the download failed ({_last_line(err)})" if download else "download is off"
            raise DatasetNotFoundError(
                f"{self.name} not found in {self.data_dir} and {why}. Fix: run once with "
                f"--data.download true on a machine with network, or copy the {self.name} files "
                f"into {self.data_dir} (or point --data.root at a folder that has them)."
            ) from err


def _last_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[-1]
