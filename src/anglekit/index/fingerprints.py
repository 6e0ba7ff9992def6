"""Re-record the model fingerprint of an index, a shard folder or an ONNX/OpenVINO export in the
current scheme (:mod:`anglekit.model.identity`), without recomputing any vector.

Fingerprints recorded by an older anglekit summed the weights in floats, so their value changed
with the thread count and the CPU: the same model on another machine may not reproduce them. After
checking that the folder's recorded embedding settings and dimension are the model's, only the
fingerprint field is rewritten (atomically); every other byte of the metadata and every data file
stay as they were. A current-scheme fingerprint of another model is never overwritten.

:func:`adopt_model` goes one step further for an index whose vectors another model makes as well
(the adapters it was built with, merged into their base by ``anglekit merge-lora``): it re-embeds a
spread of the index's stored texts with that model and, only when every vector matches the stored
one, records that model (name, folder, settings, fingerprint) in place of the old one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.corpus.shards import MANIFEST, read_manifest
from anglekit.errors import ConfigError, DataError, ModelMismatchError
from anglekit.index.store import INDEX_FILE, VectorIndex, _read_manifest, model_record
from anglekit.io.atomic import atomic_write_json
from anglekit.io.read import describe
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.model.config import CONFIG_NAME, EmbedderConfig
from anglekit.model.identity import ModelIdentity, embedding_settings, is_current
from anglekit.model.onnx import ONNX_CONFIG
from anglekit.model.openvino import OPENVINO_CONFIG

__all__ = ["DEFAULT_MIN_COSINE", "FingerprintTarget", "FingerprintUpdate", "VectorCheck", "adopt_model", "read_target", "require_index", "update_fingerprint"]

DEFAULT_MIN_COSINE = 0.9999
"""The cosine every re-embedded text must reach against its stored vector for :func:`adopt_model`.
On the tests' tiny Llama, adapters merged re-embed to 1 within float32 rounding, while the same
adapters with B 2% smaller fall to 1 - 5e-5 .. 1 - 1.6e-3 (tests/cli/test_fingerprint_adopt.py)."""


@dataclass(frozen=True)
class VectorCheck:
    """How :func:`adopt_model`'s model re-embedded the index's stored texts."""

    texts: int
    lowest: float
    """The lowest cosine between a re-embedded text and its stored vector."""
    lowest_id: str


@dataclass(frozen=True)
class FingerprintUpdate:
    """What :func:`update_fingerprint` did to ``path`` (``kind``: index, shards or export)."""

    path: Path
    kind: str
    files: tuple[Path, ...]
    """The metadata files holding the fingerprint."""
    old: str
    new: str
    legacy_match: bool | None
    """Whether this machine reproduces the old (older-scheme) fingerprint for the model: True, False,
    or None when there was nothing to re-record or the model has no older scheme."""
    check: VectorCheck | None = None
    """What :func:`adopt_model` re-embedded (None for :func:`update_fingerprint`)."""
    model_name: str | None = None
    """The model the folder now records, when :func:`adopt_model` replaced it."""

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def summary(self) -> str:
        if not self.changed:
            return f"{self.path}: already records fingerprint {self.new}; nothing to do"
        note = {True: "", False: " (this machine computes another older-scheme value, as expected across machines)", None: ""}[self.legacy_match]
        names = ", ".join(file.name for file in self.files)
        if self.check is not None:
            return (
                f"{self.path}: fingerprint {self.old} -> {self.new} in {names}: {self.check.texts} stored texts re-embedded, lowest "
                f"cosine {self.check.lowest:.6f}; the index now records the model {self.model_name}; no stored vector changed"
            )
        return f"{self.path}: fingerprint {self.old} -> {self.new} in {names}{note}; no vector recomputed"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"unreadable JSON ({exc})", source=str(path)) from None
    if not isinstance(data, dict):
        raise DataError(f"expected a JSON object, got {describe(data)}", source=str(path))
    return data


def _field(data: dict[str, Any], dotted: str, kind: type | tuple[type, ...], source: Path) -> Any:
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DataError(f"expected {names}, got {describe(value)}", source=str(source), field=dotted)
    return value


@dataclass(frozen=True)
class FingerprintTarget:
    """The fingerprint records of one folder (:func:`read_target`); ``kind``: index, shards or export."""

    kind: str
    records: list[tuple[Path, dict[str, Any], str]]
    """(metadata file, its JSON, the dotted key of the fingerprint in it)"""
    settings: dict[str, Any]
    settings_file: Path
    dim: int
    output_dim: bool
    """Whether ``dim`` is the model's output dimension (else its hidden size)."""


def read_target(path: str | os.PathLike[str]) -> FingerprintTarget:
    """The fingerprint records of the folder at ``path`` (checked, nothing written): a ConfigError
    for a missing path, a file or a folder of none of the kinds, a DataError for malformed metadata."""
    folder = Path(os.fspath(path)).expanduser()
    if not folder.exists():
        raise ConfigError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise ConfigError(f"{folder}: a file; give the folder of an index, of encode's shards or of an ONNX/OpenVINO export")
    if (folder / INDEX_FILE).is_file():
        data = _read_manifest(folder)
        path = folder / INDEX_FILE
        _field(data, "model.fingerprint", str, path)
        return FingerprintTarget(
            "index", [(path, data, "model.fingerprint")], _field(data, "model.embedder_config", dict, path), path, _field(data, "model.dim", int, path), True
        )
    if (folder / MANIFEST).is_file():
        data = read_manifest(folder) or {}
        path = folder / MANIFEST
        _field(data, "model_fingerprint", str, path)
        return FingerprintTarget(
            "shards", [(path, data, "model_fingerprint")], _field(data, "embedder_config", dict, path), path, _field(data, "dim", int, path), True
        )
    infos = [folder / name for name in (ONNX_CONFIG, OPENVINO_CONFIG) if (folder / name).is_file()]
    if infos:
        records = []
        dims = set()
        for path in infos:
            data = _read_json(path)
            _field(data, "source_fingerprint", str, path)
            dims.add(_field(data, "hidden_size", int, path))
            records.append((path, data, "source_fingerprint"))
        if len({data["source_fingerprint"] for _, data, _ in records}) > 1:
            raise DataError(f"{' and '.join(p.name for p in infos)} record different source fingerprints", source=str(folder))
        if len(dims) > 1:
            raise DataError(f"{' and '.join(p.name for p in infos)} record different hidden sizes", source=str(folder))
        settings_file = folder / CONFIG_NAME
        if not settings_file.is_file():
            raise DataError(f"no {CONFIG_NAME}: the export's settings are missing", source=str(folder))
        return FingerprintTarget("export", records, _read_json(settings_file), settings_file, dims.pop(), False)
    raise ConfigError(
        f"{folder}: none of an index folder ({INDEX_FILE}), a shard folder of 'anglekit encode --output-dir' ({MANIFEST}) "
        f"or an ONNX/OpenVINO export ({ONNX_CONFIG}, {OPENVINO_CONFIG})"
    )


def _check_settings(model: Any, recorded: dict[str, Any], source: Path) -> None:
    config = EmbedderConfig.from_dict(recorded, source=str(source))
    theirs, ours = embedding_settings(config), embedding_settings(model.config)
    differ = [
        f"{key} (recorded {theirs.get(key)!r}, the model's {ours.get(key)!r})" for key in sorted(set(theirs) | set(ours)) if theirs.get(key) != ours.get(key)
    ]
    if differ:
        raise ModelMismatchError(
            f"{source}: recorded with other embedding settings than the model's: {'; '.join(differ)}. Load the model with the "
            "settings that made these vectors (e.g. --prompt, --max-length, --pooling), or these vectors are another model's"
        )


def update_fingerprint(model: Any, path: str | os.PathLike[str]) -> FingerprintUpdate:
    """Record ``model``'s current fingerprint in the index, shard folder or ONNX/OpenVINO export at
    ``path`` (see the module doc). A ConfigError for a path that is none of those, a DataError for
    malformed metadata, a ModelMismatchError when the recorded settings or dimension are not the
    model's, or when the folder records a current-scheme fingerprint of another model."""
    folder = Path(os.fspath(path)).expanduser()
    target = read_target(folder)
    records = target.records
    first, data, key = records[0]
    old = _field(data, key, str, first)
    identity = ModelIdentity(model)
    new = identity.current
    if old == new:
        return FingerprintUpdate(folder, target.kind, tuple(p for p, _, _ in records), old, new, None)
    if is_current(old):
        hint = ""
        if target.kind == "index":
            hint = (
                ". If the model makes the same vectors (say, the adapters the index was built with, merged by 'anglekit merge-lora'), "
                "add --verify-texts N: it re-embeds N of the stored texts and records the model only if every vector matches"
            )
        raise ModelMismatchError(
            f"{first}: records fingerprint {old}, of the current scheme, and the model given ({getattr(model, 'source', '?')}) has "
            f"fingerprint {new}: these vectors are another model's; not overwritten{hint}"
        )
    _check_shape(model, target, first)
    for file, content, dotted in records:
        parent = content
        *head, last = dotted.split(".")
        for part in head:
            parent = parent[part]
        parent[last] = new
        atomic_write_json(file, content)
    legacy = identity.legacy
    return FingerprintUpdate(folder, target.kind, tuple(p for p, _, _ in records), old, new, None if legacy is None else legacy == old)


def _check_shape(model: Any, target: FingerprintTarget, first: Path) -> None:
    """The recorded embedding settings and dimension are ``model``'s; a ModelMismatchError otherwise."""
    _check_settings(model, target.settings, target.settings_file)
    expected = int(getattr(model, "output_dim", model.dim)) if target.output_dim else int(model.dim)
    if target.dim != expected:
        raise ModelMismatchError(f"{first}: records dimension {target.dim}, the model's is {expected}: these vectors are another model's; not overwritten")


def require_index(target: FingerprintTarget, folder: str | os.PathLike[str]) -> FingerprintTarget:
    """``target`` when it is an index (the one kind whose stored texts :func:`adopt_model` can
    re-embed); a ConfigError naming ``folder`` otherwise."""
    if target.kind != "index":
        raise ConfigError(
            f"{folder}: {'encode shards' if target.kind == 'shards' else 'an export'} store no texts to re-embed; re-encode or "
            "re-export with the model instead (only an index can take another model after a check)"
        )
    return target


def adopt_model(
    model: Any,
    path: str | os.PathLike[str],
    *,
    texts: int,
    min_cosine: float = DEFAULT_MIN_COSINE,
    name: str | None = None,
    load: dict[str, Any] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> FingerprintUpdate:
    """Make the index at ``path`` record ``model`` (an Embedder; ``name``: how to load it again,
    default its source; ``load``: its dtype/revision/trust_remote_code) in place of the model that
    built it, once ``model`` is shown to make its vectors: ``texts`` of the stored texts, spread
    evenly over the index, are re-embedded (with the document prompt, as the index embeds) and each
    must reach ``min_cosine`` against its stored vector. Only the ``model`` record of index.json is
    rewritten (atomically); no data file changes.

    A ConfigError for a folder that is not an index or stores no texts, or bad ``texts`` and
    ``min_cosine``; a ModelMismatchError, with nothing written, for other embedding settings, another
    dimension or a text below ``min_cosine``."""
    if isinstance(texts, bool) or not isinstance(texts, int) or texts < 1:
        raise ConfigError(f"texts must be an integer >= 1, got {texts!r}")
    if isinstance(min_cosine, bool) or not isinstance(min_cosine, (int, float)) or not 0 < min_cosine <= 1:
        raise ConfigError(f"min_cosine must be a number in (0, 1], got {min_cosine!r}")
    folder = Path(os.fspath(path)).expanduser()
    target = require_index(read_target(folder), folder)
    first, data, _ = target.records[0]
    old, new = _field(data, "model.fingerprint", str, first), model.fingerprint()
    if old == new:
        return FingerprintUpdate(folder, target.kind, (first,), old, new, None)
    _check_shape(model, target, first)
    index = VectorIndex.load(folder, mmap=True)
    rows = [row for row, text in enumerate(index.texts) if text is not None]
    if not rows:
        raise ConfigError(f"{folder}: the index stores no texts (built with --no-texts), so nothing can be re-embedded to check the model")
    picked = sorted({rows[int(i)] for i in np.linspace(0, len(rows) - 1, num=min(texts, len(rows))).round()})
    vectors = model.encode([str(index.texts[row]) for row in picked], batch_size, normalize=True, role=model.config.role_if_present("document"))
    cosines = np.einsum("ij,ij->i", np.asarray(vectors, dtype=np.float64), np.asarray(index.vectors[picked], dtype=np.float64))
    worst = int(np.argmin(cosines))
    check = VectorCheck(len(picked), float(cosines[worst]), index.ids[picked[worst]])
    below = int((~(cosines >= min_cosine)).sum())  # a NaN vector is below too
    if below:
        raise ModelMismatchError(
            f"{first}: {below} of {check.texts} stored texts re-embed below cosine {min_cosine:g} against their stored vectors (lowest "
            f"{check.lowest:.6f}, document {check.lowest_id!r}): these vectors are another model's, or the model runs at another precision "
            "than the one that built the index (try --precision fp32); not overwritten"
        )
    data["model"] = model_record(model, name, load)
    atomic_write_json(first, data)
    return FingerprintUpdate(folder, target.kind, (first,), old, new, None, check, data["model"]["name"])
