"""A trained classifier on images as they come: its data's evaluation transform, then class names."""

import torch
from PIL import Image, ImageOps
from torch import Tensor
from torchvision.transforms import v2

from models.errors import ModelError


class Inference:
    """``preprocess`` and ``predict_image`` for a classifier whose ``data_card`` (saved in its checkpoints)
    says what it was trained on: class names, input channels and size, resizing and normalization."""

    data_card: dict | None

    def preprocess(self, image: Image.Image | Tensor) -> Tensor:
        """A PIL image, or uint8 images (C, H, W) or (N, C, H, W), as the network's input batch on its
        device: a photo turned upright (EXIF), the short side resized to the data's ``resize_size``, the
        centre ``image_size`` square taken, scaled to [0, 1] and normalized, as the data's evaluation split
        was."""
        card = self._card()
        channels = card["in_channels"]
        if isinstance(image, Image.Image):  # upright as its EXIF says, as predict and serve read files
            upright = ImageOps.exif_transpose(image)
            image = v2.functional.pil_to_tensor(upright.convert("L" if channels == 1 else "RGB"))
        if not isinstance(image, Tensor) or image.dtype != torch.uint8 or image.ndim not in (3, 4):
            raise ModelError("preprocess takes a PIL image or a uint8 tensor (C, H, W) or (N, C, H, W)")
        if image.shape[-3] != channels:
            raise ModelError(f"the image has {image.shape[-3]} channels, the network takes {channels}")
        steps = v2.Compose(
            [
                v2.Resize(card.get("resize_size", card["image_size"]), antialias=True),
                v2.CenterCrop(card["image_size"]),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(card["mean"], card["std"]),
            ]
        )
        batch = steps(image if image.ndim == 4 else image[None])
        return batch.to(self.device)

    @torch.no_grad()
    def predict_image(self, image: Image.Image | Tensor, top: int | None = None) -> list[tuple[str, float]]:
        """The classes of one image (PIL, or uint8 (C, H, W)) with their probabilities, most likely first;
        the first ``top`` of them (None: all)."""
        if isinstance(image, Tensor) and image.ndim != 3:
            raise ModelError("predict_image takes one image: a PIL image or a uint8 tensor (C, H, W)")
        probabilities = self(self.preprocess(image)).softmax(dim=1)[0].cpu()
        order = probabilities.argsort(descending=True)[:top].tolist()
        names = self._card().get("class_names") or [str(k) for k in range(len(probabilities))]
        return [(names[k], probabilities[k].item()) for k in order]

    def _card(self) -> dict:
        card = self.data_card or {}
        missing = [k for k in ("in_channels", "image_size", "mean", "std") if k not in card]
        if missing:
            raise ModelError(
                f"this model does not know its data's {', '.join(missing)}: load a checkpoint of a fit "
                "(models.load(path)), whose DataModule gives them"
            )
        return card
