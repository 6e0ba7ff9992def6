"""The int8 exports a model folder holds of its own weights (``anglekit serve`` serves the fastest).

An export is found in an immediate subfolder of the model's folder (``anglekit export MODEL
--format openvino --quantize int8-static --output-dir MODEL/openvino-int8``, or ``--format onnx
--quantize int8``) when its info file records int8 weights, the check against the model that the
export made and passed, and the fingerprint of the model it was exported from: only an export of
these weights with these settings counts (a stale one, written before the weights changed, is
passed over). The fingerprint does not depend on the machine (:mod:`anglekit.model.identity`):
an export written with any thread count or CPU counts. Fastest first on CPUs: OpenVINO static int8 (weights and activations), onnxruntime
dynamic int8, OpenVINO weight-only int8 (benchmarks/README.md, the encode tables).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.model.identity import MIGRATE, ModelIdentity, is_current
from anglekit.model.onnx import ONNX_CONFIG, ONNX_FILE
from anglekit.model.openvino import OPENVINO_CONFIG, OPENVINO_FILE

log = logging.getLogger(__name__)

RANK: dict[tuple[str, str], int] = {("openvino", "int8-static"): 0, ("onnx", "int8"): 1, ("openvino", "int8"): 2}
"""(backend, quantize) -> preference, lowest first."""
_FILES = {"openvino": (OPENVINO_FILE, OPENVINO_CONFIG), "onnx": (ONNX_FILE, ONNX_CONFIG)}


@dataclass(frozen=True)
class Int8Export:
    """One int8 export of the model in a subfolder of its folder."""

    path: Path
    backend: str
    quantize: str
    min_cosine: float | None
    """The export's own check: the lowest cosine to the model on its check batch."""

    def describe(self) -> str:
        check = f", min cosine to the model {self.min_cosine:.4f} on the export's check" if self.min_cosine is not None else ""
        return f"the {self.backend} {self.quantize} export in {self.path}{check}"


def _read(folder: Path, backend: str) -> dict[str, Any] | None:
    model_file, info_file = _FILES[backend]
    if not (folder / model_file).is_file() or not (folder / info_file).is_file():
        return None
    try:
        info = json.loads((folder / info_file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("%s: unreadable %s (%s); not served", folder, info_file, exc)
        return None
    if not isinstance(info, dict):
        log.warning("%s: holds %s, expected a JSON object; not served", folder / info_file, _describe(info))
        return None
    return info


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {json.dumps(value)[:80] if _jsonable(value) else repr(value)[:80]}"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _typed_fields(info: dict[str, Any], info_path: Path) -> tuple[str, str, float | None] | None:
    """(quantize, source_fingerprint, min_cosine) of an export's info, each of the type anglekit
    writes; a field of another type (the file edited or written by another tool) is warned about,
    naming the file, the field and the value, and the export is not served (None)."""
    quantize, fingerprint, check = info.get("quantize"), info.get("source_fingerprint"), info.get("check")
    cosine = check.get("min_cosine") if isinstance(check, dict) else None
    wrong = [
        (field, value, expected)
        for field, value, ok, expected in (
            ("quantize", quantize, quantize is None or isinstance(quantize, str), "a string or null"),
            ("source_fingerprint", fingerprint, fingerprint is None or isinstance(fingerprint, str), "a string"),
            ("check", check, check is None or isinstance(check, dict), "an object"),
            ("check.min_cosine", cosine, cosine is None or (isinstance(cosine, (int, float)) and not isinstance(cosine, bool)), "a number"),
        )
        if not ok
    ]
    for field, value, expected in wrong:
        log.warning("%s: field %r is %s, expected %s; this export is not served", info_path, field, _describe(value), expected)
    if wrong or quantize is None:
        return None
    return quantize, fingerprint or "", float(cosine) if cosine is not None else None


def int8_exports(folder: str | os.PathLike[str], model: Any) -> list[Int8Export]:
    """The int8 exports of ``model`` in the subfolders of ``folder``, fastest first (empty when
    ``folder`` is not a local folder or holds none). ``model``: the model (checked through
    :class:`~anglekit.model.identity.ModelIdentity`: an export that recorded a fingerprint of the
    older scheme counts when the model reproduces it here), or its fingerprint as a string. An info
    file whose ``quantize``, ``source_fingerprint`` or ``check`` is of the wrong type is passed over
    with a warning naming the file, the field and the value."""
    root = Path(os.fspath(folder)).expanduser()
    if not root.is_dir():
        return []
    identity = None if isinstance(model, str) else ModelIdentity(model)
    found: list[Int8Export] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        for backend in _FILES:
            info = _read(sub, backend)
            if info is None:
                continue
            typed = _typed_fields(info, sub / _FILES[backend][1])
            if typed is None:
                continue
            quantize, recorded, cosine = typed
            if (backend, quantize) not in RANK:
                log.warning("%s: quantize %r is not one anglekit serves for %s (%s); not served", sub / _FILES[backend][1], quantize, backend,
                            ", ".join(q for b, q in RANK if b == backend))  # fmt: skip
                continue
            match = ("current" if recorded == model else None) if identity is None else identity.match(recorded)
            if match is None:
                hint = f" (its fingerprint is of the older scheme: if it is of these weights, {MIGRATE.format(path=sub)})" if not is_current(recorded) else ""
                log.info("%s: an int8 %s export of other weights or settings%s; not served", sub, backend, hint)
                continue
            found.append(Int8Export(sub, backend, quantize, cosine))
    return sorted(found, key=lambda e: RANK[(e.backend, e.quantize)])


__all__ = ["RANK", "Int8Export", "int8_exports"]
