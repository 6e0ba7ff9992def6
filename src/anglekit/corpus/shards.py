"""Numbered shards of vectors in a folder: the format, the commit record of each, and reading back.

A shard folder holds ``manifest.json`` (what was encoded, by which model, how) and, per shard ``k``:

- ``shard-00000k.npy`` (float32 ``[rows, dim]``) with ``shard-00000k.ids.json`` (a JSON array), or
  ``shard-00000k.parquet`` (columns ``id``: string, ``embedding``: fixed-size list of float32);
- ``shard-00000k.json``, its record: first row, rows, dim, and the size and SHA-256 of each file.

Shard ``k`` holds the corpus records ``[k * shard_size, (k + 1) * shard_size)``. Each file is
written atomically and the record last, so a shard is finished exactly when its record exists and
its files match it; anything else (a kill -9 between the files, a truncated or edited file, a
deleted one) is found by :func:`check_shard` and :func:`open_shards`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.read import describe

__all__ = [
    "MANIFEST",
    "finished_shards",
    "SHARD_FORMATS",
    "ShardSet",
    "check_shard",
    "file_digest",
    "open_shards",
    "read_manifest",
    "record_path",
    "shard_files",
    "shard_name",
]

MANIFEST = "manifest.json"
FORMAT = "anglekit-shards"
FORMAT_VERSION = 1
SHARD_FORMATS = ("npy", "parquet")


def shard_name(index: int) -> str:
    return f"shard-{index:06d}"


def shard_files(index: int, fmt: str) -> list[str]:
    """The data files of shard ``index`` (record excluded)."""
    name = shard_name(index)
    return [f"{name}.npy", f"{name}.ids.json"] if fmt == "npy" else [f"{name}.parquet"]


def record_path(folder: Path, index: int) -> Path:
    return folder / f"{shard_name(index)}.json"


def finished_shards(folder: Path) -> list[int]:
    """Indices of the shards in ``folder`` whose record exists: finished (unless a file was changed since)."""
    indices = []
    for path in Path(folder).glob("shard-*.json"):
        number = path.name[len("shard-") : -len(".json")]
        if number.isdigit():
            indices.append(int(number))
    return sorted(indices)


def file_digest(path: Path) -> dict[str, Any]:
    """``{"bytes": size, "sha256": hex}`` of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The folder's manifest, or None when it has none."""
    path = Path(folder) / MANIFEST
    if path.exists() and not path.is_file():
        raise DataError("is a folder; expected the JSON manifest of 'anglekit encode --output-dir'", source=str(path))
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"unreadable shard manifest ({exc})", source=str(path)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError("not a manifest of anglekit shards", source=str(path))
    for key, required in (("version", True), ("shard_size", True), ("shards", False), ("rows", False), ("dim", False)):
        value = data.get(key)
        if (value is not None or required) and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise DataError(f"expected an integer >= 0{'' if required else ' or null'}, got {describe(value)}", source=str(path), field=key)
    if data.get("shard_format") not in SHARD_FORMATS:
        raise DataError(f"expected one of {', '.join(SHARD_FORMATS)}, got {describe(data.get('shard_format'))}", source=str(path), field="shard_format")
    if data["version"] > FORMAT_VERSION:
        raise ConfigError(f"{path}: written by a newer anglekit (shard format {data['version']}); upgrade anglekit")
    return data


def check_shard(folder: Path, index: int, fmt: str, *, hashes: bool = True) -> tuple[dict[str, Any] | None, str]:
    """(record, "") when shard ``index`` is finished and intact, else (None, what is wrong)."""
    path = record_path(folder, index)
    if not path.is_file():
        return None, "missing"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        files = record["files"]
        int(record["rows"]), int(record["first_row"])
        if not all(isinstance(e, dict) and isinstance(e.get("bytes"), int) and isinstance(e.get("sha256"), str) for e in files.values()):
            raise TypeError("each file needs its bytes and sha256")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return None, f"unreadable record {path.name} ({type(exc).__name__}: {exc})"
    if sorted(files) != sorted(shard_files(index, fmt)):
        return None, f"record {path.name} lists {sorted(files)}, expected {shard_files(index, fmt)}"
    for name, expected in files.items():
        file = folder / name
        if not file.is_file():
            return None, f"{name} is missing"
        size = file.stat().st_size
        if size != expected["bytes"]:
            return None, f"{name} has {size} bytes, its record says {expected['bytes']} (truncated or rewritten)"
        if hashes and file_digest(file)["sha256"] != expected["sha256"]:
            return None, f"{name} does not match the SHA-256 of its record (corrupt)"
    return record, ""


def _read_npy(folder: Path, index: int, source: str) -> tuple[list[str], np.ndarray]:
    name = shard_name(index)
    try:
        vectors = np.load(folder / f"{name}.npy", allow_pickle=False)
        ids = json.loads((folder / f"{name}.ids.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"shard {index} cannot be read ({exc})", source=source) from None
    return ids, vectors


def _read_parquet(folder: Path, index: int, source: str) -> tuple[list[str], np.ndarray]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(folder / f"{shard_name(index)}.parquet")
        ids = table.column("id").to_pylist()
        column = table.column("embedding").combine_chunks()
        dim = column.type.list_size
        vectors = column.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise DataError(f"shard {index} cannot be read ({exc})", source=source) from None
    return ids, vectors


@dataclass
class ShardSet:
    """The finished shards of a folder, checked: :func:`open_shards` builds it."""

    folder: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def rows(self) -> int:
        return sum(int(r["rows"]) for r in self.records)

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    def __iter__(self) -> Iterator[tuple[list[str], np.ndarray]]:
        """(ids, float32 vectors) of each shard in order."""
        fmt = self.manifest["shard_format"]
        read = _read_npy if fmt == "npy" else _read_parquet
        for record in self.records:
            ids, vectors = read(self.folder, int(record["shard"]), str(self.folder))
            if len(ids) != int(record["rows"]) or vectors.shape != (int(record["rows"]), self.dim):
                raise DataError(
                    f"shard {record['shard']} holds {vectors.shape} vectors and {len(ids)} ids, its record says {record['rows']} rows", source=str(self.folder)
                )
            yield ids, vectors

    def load(self) -> tuple[list[str], np.ndarray]:
        """Every id and vector, concatenated in corpus order."""
        ids: list[str] = []
        parts = []
        for shard_ids, vectors in self:
            ids.extend(shard_ids)
            parts.append(vectors)
        return ids, np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)


def open_shards(folder: str | os.PathLike[str], *, hashes: bool = True, allow_partial: bool = False) -> ShardSet:
    """The shards of an encode output folder, each checked against its record (sizes and, with
    ``hashes``, SHA-256). A missing or corrupt shard is a DataError naming it, and so is a folder
    whose encode has not finished (unless ``allow_partial``: then the finished shards only)."""
    path = Path(folder)
    manifest = read_manifest(path)
    if manifest is None:
        raise DataError(f"no {MANIFEST}: not a folder written by 'anglekit encode --output-dir'", source=str(path))
    fmt = manifest["shard_format"]
    total = manifest.get("shards")
    if total is None and not allow_partial:
        raise DataError("the encode that writes this folder has not finished (manifest.json has no shard count); run it again to complete it", source=str(path))
    known = sorted(int(p.name[6:12]) for p in path.glob("shard-[0-9][0-9][0-9][0-9][0-9][0-9].json"))
    indices = range(int(total)) if total is not None else known
    records, problems = [], []
    for index in indices:
        record, problem = check_shard(path, index, fmt, hashes=hashes)
        if record is None:
            if not (allow_partial and problem == "missing"):
                problems.append(f"shard {index}: {problem}")
            continue
        if int(record["first_row"]) != index * int(manifest["shard_size"]):
            problems.append(f"shard {index}: starts at row {record['first_row']}, expected {index * int(manifest['shard_size'])}")
            continue
        records.append(record)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise DataError(f"{len(problems)} shard(s) missing or corrupt: {shown}; run the same encode command again to redo them", source=str(path))
    if total is not None and len(records) == int(total) and manifest.get("rows") is not None and sum(int(r["rows"]) for r in records) != int(manifest["rows"]):
        raise DataError(f"the shards hold {sum(int(r['rows']) for r in records)} rows, the manifest says {manifest['rows']}", source=str(path))
    return ShardSet(path, manifest, records)
