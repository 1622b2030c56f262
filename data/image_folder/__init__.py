"""Optional part: your own images, one folder per class (``--data ImageFolderDataModule``).

Decoding and its cache, the folder's layout checks, the photo transforms. To drop it:
``rm -r data/image_folder tests/data/image_folder`` and its line in ``data/__init__.py``.
"""

from data.image_folder.datamodule import ImageFolderDataModule

__all__ = ["ImageFolderDataModule"]
