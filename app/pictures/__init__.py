"""Optional part: pictures of each validation for W&B and TensorBoard, plots when fit ends.

To drop it: ``rm -r app/pictures tests/app/pictures benchmarks/pictures.py`` and its line in
``configs/defaults.yaml``.
"""

from app.pictures.callback import ValidationPictures

__all__ = ["ValidationPictures"]
