"""What the ``onnx`` and ``openvino`` export formats share: the model card of a folder a runtime
runs on its own, and reading back the check :mod:`anglekit.model.onnx` made when it wrote the folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anglekit.model.card import ModelCardData, card_of, describe, render


def write_card(model: Any, folder: Path, card: ModelCardData | None, *, backend: str, note: str, tag: str) -> None:
    """README.md of an exported folder: the model's card, how to load it with ``backend``, and ``note``."""
    usage = (
        f'```python\nfrom anglekit import Embedder\n\nmodel = Embedder.from_pretrained("PATH")  # the {backend} backend\n'
        'vectors = model.encode(["a sentence"])\n```\n\nOr `anglekit encode PATH --input texts.txt --output vectors.npy`.'
    )
    text = render(card_of(model, card), describe(model.config, model.dim), library_name="anglekit", usage=usage, notes=[note], extra_tags=(tag,))
    (folder / "README.md").write_text(text, encoding="utf-8")


def read_check(folder: Path, info_file: str, runtime: str) -> tuple[float | None, str]:
    """(max difference or None, a sentence) from the ``check`` the export recorded in ``info_file``."""
    info = json.loads((folder / info_file).read_text(encoding="utf-8"))
    check, precision = info["check"], info.get("precision", "fp32")
    if "max_abs_difference" in check:
        return float(check["max_abs_difference"]), f"checked with {runtime} ({precision})"
    weights = info.get("weights") or "int8"
    computing = f", computing in {precision}" if "precision" in info else ""
    return None, f"checked with {runtime}: {weights}{computing}, min cosine to the model {check['min_cosine']:.4f}"


def tolerance(model: Any) -> float:
    """The largest difference an fp32 export may show (:data:`anglekit.model.onnx.FP32_TOLERANCE`)."""
    from anglekit.model.onnx import FP32_TOLERANCE

    return FP32_TOLERANCE


__all__ = ["read_check", "tolerance", "write_card"]
