"""Flickr30k captions (Multi30k task 2, English): five independent captions per image.

Layout under ``flickr30k/``::

    Test/test.1 ... test.5      line i of every file describes image i (1000 images)
    Val/val.1 ... val.5         (1014 images)
    Train/train.1 ... train.5   (29000 images)
    splits/<split>_images.txt   image file names, one a line, in the same order (optional)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from anglekit.data.sources import read_lines
from anglekit.data.splits import normalize_split
from anglekit.errors import ConfigError, DataError

FLICKR_SPLITS: dict[str, tuple[str, str, str]] = {
    # split: (folder, file stem, image list)
    "train": ("Train", "train", "train_images.txt"),
    "dev": ("Val", "val", "val_images.txt"),
    "test": ("Test", "test", "test_images.txt"),
}
N_CAPTIONS = 5


@dataclass(frozen=True)
class FlickrCaptions:
    """``captions[i][j]``: caption ``j`` (0-4) of image ``i``; ``image_ids[i]`` its file name (or ``"#i"``)."""

    split: str
    captions: list[list[str]]
    image_ids: list[str]
    sources: tuple[str, ...]

    @property
    def n_images(self) -> int:
        return len(self.captions)


def load_flickr30k_captions(directory: str | os.PathLike[str], split: str = "test", *, n_captions: int = N_CAPTIONS) -> FlickrCaptions:
    """Read the ``n_captions`` line-aligned caption files of ``split`` (``train``, ``dev``/``val``, ``test``).

    Every file must have the same number of lines and no empty caption; the image list, when
    present, must have one line per image.
    """
    try:
        key = normalize_split(split)
    except ConfigError:  # a parameter, not the data: a usage error
        raise ConfigError(f"unknown Flickr30k split {split!r}; expected one of train, dev (val), test") from None
    folder, stem, image_list = FLICKR_SPLITS[key]
    root = Path(directory)
    files = [
        read_lines(root / folder / f"{stem}.{j}", what=f"Flickr30k {key} captions: one caption a line, line-aligned with {stem}.1 .. {stem}.{n_captions}")
        for j in range(1, n_captions + 1)
    ]
    n = len(files[0].lines)
    if n == 0:
        raise DataError("is empty; expected one caption per image", source=files[0].path)
    for tf in files[1:]:
        if len(tf.lines) != n:
            raise DataError(
                f"has {len(tf.lines)} lines but {files[0].path} has {n}; expected line-aligned caption files (line i of each file describes image i)",
                source=tf.path,
            )
    for tf in files:
        for row, line in enumerate(tf.lines, start=1):
            if not line.strip():
                raise DataError("empty caption; expected one caption per line", source=tf.path, row=row)
    captions = [[tf.lines[i].strip() for tf in files] for i in range(n)]
    ids_path = root / "splits" / image_list
    if ids_path.is_file():
        ids = [line.strip() for line in read_lines(ids_path, what="image file names, one a line").lines]
        if len(ids) != n:
            raise DataError(f"has {len(ids)} image names but the caption files have {n} lines; expected one per image", source=str(ids_path))
    else:
        ids = [f"#{i}" for i in range(n)]
    return FlickrCaptions(key, captions, ids, tuple(tf.path for tf in files))
