"""The layout of an image folder, ``ROOT/train/<class>/`` and, optional, ``ROOT/val/<class>/`` and
``ROOT/test/<class>/``: each mistake in it ends in one line that says how to fix it."""

from pathlib import Path

from data.vision import DataError, DatasetNotFoundError

SPLITS = ("train", "val", "test")


def train_classes(root: Path) -> list[str]:
    """The class folders of ``root/train``, sorted: label i is the i-th."""
    if not root.is_dir():
        raise DatasetNotFoundError(f"no folder {root}: pass --data.root the folder that holds train/")
    if root.name in SPLITS and (root.parent / "train").is_dir():
        raise DatasetNotFoundError(f"{root} is a split: pass --data.root {root.parent} (it holds train/)")
    folders = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not (root / "train").exists() and folders:
        shown = ", ".join(folders[:3]) + (", ..." if len(folders) > 3 else "")
        raise DatasetNotFoundError(
            f"{root} has folders ({shown}) but no train/: move the class folders into {root}/train/ "
            f"(test images, in the same class folders, into {root}/test/), or point --data.root at "
            f"the folder that holds train/"
        )
    return class_folders(root / "train")


def class_folders(folder: Path) -> list[str]:
    """The subfolders of ``folder``, sorted; two or more."""
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
    if not classes:
        raise DatasetNotFoundError(
            f"no class folders in {folder}: put your images in {folder}/<class name>/ "
            f"(or point --data.root at the folder that holds train/)"
        )
    if len(classes) == 1:
        raise DataError(
            f"only one class folder in {folder} ({classes[0]}): a classifier needs two or more, "
            f"one folder of images per class"
        )
    return classes


def check_split_classes(root: Path, split: str, train: list[str]) -> None:
    """Refuse a ``root/split`` (``val`` or ``test``) whose class folders are not ``train``'s: its labels,
    numbered by its own sorted folders, would not be train/'s."""
    found = class_folders(root / split)
    if found != train:
        only_here, only_train = sorted(set(found) - set(train)), sorted(set(train) - set(found))
        differ = [f"only in {split}/: {', '.join(only_here)}"] if only_here else []
        differ += [f"only in train/: {', '.join(only_train)}"] if only_train else []
        raise DataError(
            f"the class folders of {root / split} differ from those of {root}/train "
            f"({'; '.join(differ)}): give both the same class folders"
        )
