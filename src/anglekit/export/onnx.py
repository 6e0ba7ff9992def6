"""Export format ``onnx``: the graph onnxruntime runs (backbone + pooling + normalisation), fp32 or
dynamic int8, with the tokenizer and the anglekit config beside it (see :mod:`anglekit.model.onnx`).
The folder loads with ``Embedder.from_pretrained(folder)`` (or ``backend="onnx"``) and ``--backend
onnx`` on the command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.config import setting
from anglekit.export.runtime_folder import read_check, tolerance, write_card
from anglekit.model.card import ModelCardData

NAME = "onnx"
DESCRIPTION = "ONNX graph for onnxruntime (fp32, or dynamic int8 with --quantize int8)"


@dataclass
class Options:
    """The options of this format: ``export(..., options={...})`` keywords and ``anglekit export`` flags
    (``--quantize``, ``--optimize``). The choices are :data:`anglekit.model.onnx.QUANTIZE` and
    :data:`~anglekit.model.onnx.OPTIMIZE_LEVELS` (that module imports torch; a test keeps them equal)."""

    quantize: str | None = setting(None, choices=("int8",), help="int8 = dynamic int8 (onnxruntime's quantize_dynamic)")
    optimize: str | None = setting(
        None,
        choices=("O1", "O2", "O3"),
        help="onnxruntime's graph optimisations, O1 basic, O2 transformer fusions (attention, skip layer norm, bias GELU; "
        "BERT-like encoders) + extended, O3 the fusions + all (for this CPU)",
    )


@dataclass
class Layout:
    quantize: str | None
    optimize: str | None
    custom: bool = False


def write(model: Any, folder: Path, *, card: ModelCardData | None = None, quantize: str | None = None, optimize: str | None = None) -> Layout:
    """Export ``model`` into ``folder``; :func:`anglekit.model.onnx.export_onnx` already compares the
    graph with the torch model (fp32: 1e-4; int8: cosine 0.97) and refuses one that differs."""
    from anglekit.model.onnx import export_onnx

    export_onnx(model, folder, quantize=quantize, optimize=optimize)
    weights = "dynamic int8 weights" if quantize else "fp32 weights"
    note = f"ONNX graph ({weights}{', optimised ' + optimize if optimize else ''}) run by onnxruntime; the pooling is part of the graph."
    write_card(model, folder, card, backend="ONNX", note=note, tag="onnx")
    return Layout(quantize=quantize, optimize=optimize)


def verify(model: Any, folder: Path, layout: Layout) -> tuple[float | None, str]:
    """The export was compared with the model when it was written; read the figure back."""
    return read_check(folder, "onnx_config.json", "onnxruntime")


__all__ = ["DESCRIPTION", "NAME", "Layout", "Options", "tolerance", "verify", "write"]
