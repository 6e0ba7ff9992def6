"""Export format ``openvino``: the ONNX graph (backbone + pooling + normalisation) converted to
OpenVINO's IR, fp32 (computing in fp32, or bf16 with ``precision="bf16"``), with int8 weights (NNCF ``compress_weights``) or int8 weights and activations
(``int8-static``: NNCF ``quantize`` calibrated on the caller's texts), with the tokenizer and the
anglekit config beside it (see :mod:`anglekit.model.openvino`). The folder loads with
``Embedder.from_pretrained(folder)`` (or ``backend="openvino"``) and ``--backend openvino``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.config import setting
from anglekit.export.runtime_folder import read_check, tolerance, write_card
from anglekit.model.card import ModelCardData

NAME = "openvino"
DESCRIPTION = "OpenVINO IR for the CPU (fp32; int8 weights with --quantize int8; int8 weights and activations with --quantize int8-static --calibration FILE)"


@dataclass
class Options:
    """The options of this format: ``export(..., options={...})`` keywords and ``anglekit export`` flags
    (``--quantize``, ``--calibration`` (a file of texts), ``--precision``). The choices are
    :data:`anglekit.model.openvino.QUANTIZE` and the keys of :data:`~anglekit.model.openvino.PRECISIONS`
    (that module imports torch; a test keeps them equal)."""

    quantize: str | None = setting(
        None,
        choices=("int8", "int8-static"),
        help="int8 = int8 weights (NNCF compress_weights), int8-static = int8 weights and activations (NNCF quantize, calibrated on --calibration)",
    )
    calibration_texts: tuple[str, ...] | None = setting(
        None, key="calibration", help="with --quantize int8-static: texts like the ones to embed, a few hundred"
    )
    precision: str | None = setting(
        None,
        choices=("fp32", "bf16"),
        help="what the folder computes in when loaded, recorded with it and checked at export: fp32 (default, on every CPU) "
        "or bf16 (CPUs with AVX512-BF16 or AMX; checked at a cosine of 0.99 to the model)",
    )


@dataclass
class Layout:
    quantize: str | None
    custom: bool = False


def write(
    model: Any,
    folder: Path,
    *,
    card: ModelCardData | None = None,
    quantize: str | None = None,
    calibration_texts: Sequence[str] | None = None,
    precision: str | None = None,
) -> Layout:
    """Export ``model`` into ``folder``; :func:`anglekit.model.openvino.export_openvino` already compares
    the compiled model with the torch one (fp32: 1e-4; int8: cosine 0.97) and refuses one that differs."""
    from anglekit.model.openvino import export_openvino

    export_openvino(model, folder, quantize=quantize, calibration_texts=calibration_texts, precision=precision or "fp32")
    weights = {None: "fp32 weights", "int8": "int8 weights (NNCF)"}.get(quantize, "int8 weights and activations (NNCF, calibrated)")
    weights += f", computing in {precision or 'fp32'}"
    write_card(model, folder, card, backend="OpenVINO", note=f"OpenVINO IR ({weights}) for the CPU; the pooling is part of the graph.", tag="openvino")
    return Layout(quantize=quantize)


def verify(model: Any, folder: Path, layout: Layout) -> tuple[float | None, str]:
    """The export was compared with the model when it was written; read the figure back."""
    from anglekit.model.openvino import OPENVINO_CONFIG

    return read_check(folder, OPENVINO_CONFIG, "OpenVINO")


__all__ = ["DESCRIPTION", "NAME", "Layout", "Options", "tolerance", "verify", "write"]
