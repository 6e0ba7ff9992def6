"""The OpenVINO backend: an exported graph compiled by OpenVINO, with the Embedder's encode API.

:func:`export_openvino` writes a folder that embeds on its own: ``openvino_model.xml``/``.bin`` (the
ONNX graph of :func:`~anglekit.model.onnx.export_onnx` converted by ``openvino.convert_model``; with
``quantize="int8"`` its weights compressed to int8 by NNCF's ``compress_weights``, OpenVINO's own
weight-only int8 form; with ``quantize="int8-static"`` weights and activations in int8, by NNCF's
post-training ``quantize`` calibrated on texts the caller gives), the tokenizer, ``anglekit_config.json`` and ``openvino_config.json`` (how it
was made, and its agreement with the torch model). :class:`OpenVinoEmbedder` also runs an ONNX folder
directly (converted when loaded). Measured on all-MiniLM-L6-v2, 2 threads (benchmarks/bench_encode.py):
OpenVINO's int8 weights keep fp32's STS-B score (onnxruntime's dynamic int8 loses about 0.3 points)
at about 0.8-0.9x onnxruntime int8's speed; static int8 (weights and activations) is the fastest
CPU backend there (see benchmarks/README.md for the figures).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError
from anglekit.io.atomic import settle_modes, staging_dir
from anglekit.io.text import is_blank
from anglekit.model.config import CONFIG_NAME, EmbedderConfig
from anglekit.model.hardware import NATIVE_BF16_FLAGS
from anglekit.model.load_settings import LoadSettings
from anglekit.model.onnx import (
    ONNX_CONFIG,
    ONNX_FILE,
    OUTPUTS,
    OnnxEmbedder,
    _quiet,
    check_against_torch,
    export_onnx,
    graph_feeds,
    is_export_folder,
    is_onnx_folder,
    load_exported,
    load_exported_parts,
    only_exported_weights,
    require_runtime,
)

OPENVINO_FILE = "openvino_model.xml"
OPENVINO_WEIGHTS = "openvino_model.bin"
OPENVINO_CONFIG = "openvino_config.json"
QUANTIZE = ("int8", "int8-static")
logger = logging.getLogger(__name__)
CALIBRATION_BATCH = 32
"""Texts per calibration batch of ``int8-static``."""
MAX_CALIBRATION_TEXTS = 4096
"""More calibration texts than this are refused (NNCF's statistics settle long before)."""
PRECISIONS = {"fp32": "f32", "bf16": "bf16"}
"""anglekit's precision names -> OpenVINO's ``INFERENCE_PRECISION_HINT``. The CPU plugin's own
default is bf16 on CPUs with bf16 instructions (AVX512-BF16, AMX) and f32 elsewhere, so the hint is
always set: a folder computes in the precision it records, on every CPU."""
BF16_MIN_COSINE = 0.99
"""A bf16 OpenVINO model's vectors must reach this cosine to the torch model's (fp32) on the check batch."""


def require_openvino() -> Any:
    """openvino, or a ConfigError saying how to get it."""
    return require_runtime("openvino", "OpenVINO", "openvino")


def is_openvino_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder written by :func:`export_openvino`."""
    return is_export_folder(path, OPENVINO_FILE)


def only_openvino_weights(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds OpenVINO weights and no PyTorch ones. A folder that holds an ONNX
    export too is claimed by both backends: the registry's ambiguity error, not ONNX by default."""
    return only_exported_weights(path, OPENVINO_FILE)


def export_openvino(
    embedder: Any,
    output_dir: str | os.PathLike[str],
    *,
    quantize: str | None = None,
    calibration_texts: Sequence[str] | None = None,
    precision: str = "fp32",
) -> Path:
    """Write ``embedder`` as an OpenVINO folder (see the module doc); returns the folder.

    ``precision``: what OpenVINO computes in when the folder is loaded (recorded in
    ``openvino_config.json``; the weights stay fp32 in the IR): ``fp32`` (default, on every CPU) or
    ``bf16`` (faster on CPUs with AVX512-BF16 or AMX; a ConfigError on others), checked at a cosine
    of :data:`BF16_MIN_COSINE`. The check compiles the model with the precision it records.

    The ONNX export (checked against torch to 1e-4) is converted with ``openvino.convert_model``;
    ``quantize="int8"`` compresses the weights with ``nncf.compress_weights`` (int8, asymmetric,
    per output channel; activations stay fp32). ``quantize="int8-static"`` quantizes weights and
    activations with ``nncf.quantize`` (transformer preset: smooth quant, fast bias correction),
    its activation ranges measured on ``calibration_texts`` (required: a few hundred texts like the
    ones the model will embed; not the test set you will score on). The result is compared with
    the torch model on a check batch (fp32: max difference <= 1e-4; int8: cosine >= 0.97) and
    refused if it differs. Written through a staging folder, so an interrupted export leaves no
    half-written model.
    """
    ov = require_openvino()
    check_precision(precision)
    if quantize is not None and quantize not in QUANTIZE:
        raise ConfigError(f"quantize must be one of {', '.join(QUANTIZE)} or None, got {quantize!r}")
    calibration = _calibration_texts(quantize, calibration_texts)
    if quantize is not None and importlib.util.find_spec("nncf") is None:
        raise ConfigError("int8 weights for OpenVINO need NNCF: pip install 'anglekit[openvino]'")
    target = Path(output_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(target)
    try:
        exporter = _write_ir(ov, embedder, staging, quantize, calibration)
        embedder.tokenizer.save_pretrained(staging)
        embedder.config.save(staging)
        try:
            agreement = _check_against_torch(embedder, staging, quantize, precision)
        except ConfigError as exc:
            if quantize != "int8-static":
                raise
            raise ConfigError(
                f"{exc}: the activation ranges come from the {len(calibration)} calibration texts; "
                "calibrate on more, and more varied, texts like the ones the model will embed"
            ) from exc
        info = {
            "format": 1, "openvino_file": OPENVINO_FILE, "outputs": list(OUTPUTS), "quantize": quantize, "weights": WEIGHTS[quantize],
            "precision": precision, "calibration_texts": len(calibration), "exporter": exporter, "openvino": ov.__version__,
            "hidden_size": int(embedder.dim), "source": embedder.source, "source_fingerprint": embedder.fingerprint(), "check": agreement,
        }  # fmt: skip
        (staging / OPENVINO_CONFIG).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        settle_modes(staging)
        target.mkdir(exist_ok=True)
        for path in sorted(staging.iterdir()):
            os.replace(path, target / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _write_ir(ov: Any, embedder: Any, staging: Path, quantize: str | None, calibration: Sequence[str]) -> str:
    """The model as OpenVINO IR in ``staging`` (through a checked ONNX export, then int8 when asked);
    returns the exporter's description."""
    onnx_folder = export_onnx(embedder, staging / "onnx")
    model = ov.convert_model(str(onnx_folder / ONNX_FILE))
    if quantize == "int8":
        with _quiet_nncf():
            import nncf

            model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    elif quantize == "int8-static":
        model = _quantize_static(embedder, model, calibration)
    ov.save_model(model, str(staging / OPENVINO_FILE), compress_to_fp16=False)
    onnx_info = json.loads((onnx_folder / ONNX_CONFIG).read_text(encoding="utf-8"))
    shutil.rmtree(onnx_folder)
    return f"{onnx_info['exporter']} -> openvino.convert_model"


WEIGHTS = {
    None: "fp32",
    "int8": "int8 (nncf.compress_weights INT8_ASYM)",
    "int8-static": "int8 weights and activations (nncf.quantize, transformer preset)",
}


def _calibration_texts(quantize: str | None, texts: Sequence[str] | None) -> list[str]:
    """The calibration texts ``int8-static`` needs (ConfigError when missing, empty, too many or not
    strings); other settings take none."""
    if quantize != "int8-static":
        if texts is not None:
            raise ConfigError(f"calibration texts are for quantize='int8-static' only, not quantize={quantize!r}")
        return []
    if texts is None or isinstance(texts, (str, bytes)):
        raise ConfigError("quantize='int8-static' needs calibration texts (a list of a few hundred texts like the ones to embed; CLI: --calibration FILE)")
    items = list(texts)
    if not items:
        raise ConfigError("the calibration texts are empty: int8-static needs at least one text (a few hundred is better)")
    if len(items) > MAX_CALIBRATION_TEXTS:
        raise ConfigError(f"{len(items)} calibration texts: at most {MAX_CALIBRATION_TEXTS} (a few hundred are enough)")
    for i, text in enumerate(items):
        if not isinstance(text, str) or is_blank(text):
            raise ConfigError(f"calibration text {i} is {type(text).__name__} {text!r}: expected a non-empty string")
    return items


def _quantize_static(embedder: Any, model: Any, texts: list[str]) -> Any:
    """Weights and activations in int8 by ``nncf.quantize``, activation ranges from ``texts``
    (tokenized as documents, batches of :data:`CALIBRATION_BATCH`)."""
    with _quiet_nncf():
        import nncf

        batches = []
        for start in range(0, len(texts), CALIBRATION_BATCH):
            ids = embedder.tokenize_unpadded(texts[start : start + CALIBRATION_BATCH], role=embedder.config.role_if_present("document"))
            batches.append(graph_feeds(embedder.pad(ids)))
        return nncf.quantize(
            model, nncf.Dataset(batches), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(batches),  # items: batches
        )  # fmt: skip


@contextlib.contextmanager
def _quiet_nncf() -> Iterator[None]:
    """Keep NNCF's statistics table and progress bar out of the user's terminal (failures still raise)."""
    logger = logging.getLogger("nncf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with _quiet(), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def check_precision(precision: Any) -> str:
    """``precision`` if OpenVINO can be asked for it, else a ConfigError naming the choices."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)} for OpenVINO, got {precision!r}")
    return str(precision)


def compiled_precision(compiled: Any) -> str:
    """The precision a compiled model really computes in (its ``INFERENCE_PRECISION_HINT`` after
    compilation: the plugin replaces a hint the CPU cannot honour)."""
    hint = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
    return "bf16" if "bf" in hint else "fp16" if "f16" in hint else "fp32"


def _check_against_torch(embedder: Any, folder: Path, quantize: str | None, precision: str) -> dict[str, float]:
    """The folder compiled as it will run (``precision``) against the torch model: fp32 to
    FP32_TOLERANCE; int8 at INT8_MIN_COSINE; bf16 (fp32 weights) at :data:`BF16_MIN_COSINE`."""
    compiled = OpenVinoEmbedder.compile(folder / OPENVINO_FILE, threads=None, precision=precision)
    pooled = lambda batch: _infer(compiled, batch)[0]  # noqa: E731
    if precision == "bf16" and quantize is None:
        return check_against_torch(embedder, pooled, None, "OpenVINO", min_cosine=BF16_MIN_COSINE, what="bf16")
    return check_against_torch(embedder, pooled, quantize, "OpenVINO", what=None if precision == "fp32" else precision)


def _infer(compiled: Any, batch: dict[str, Any]) -> list[np.ndarray]:
    results = compiled.create_infer_request().infer(graph_feeds(batch))
    return [np.asarray(results[compiled.output(name)], dtype=np.float32) for name in OUTPUTS]


class OpenVinoEmbedder(OnnxEmbedder):
    """An exported model compiled by OpenVINO (CPU), with the Embedder's encode API."""

    backend = "openvino"
    pad_multiple = 8
    """Batches are padded to a multiple of 8 tokens: OpenVINO's CPU plugin prepares its kernels for
    each new input shape (4 ms a shape in bf16, 16 ms in static int8, for MiniLM on an AMX CPU),
    so fewer distinct widths mean fewer of those stalls, and the aligned shapes run no slower
    (benchmarks/README.md, "Padding OpenVINO batches to 8 tokens, and warming shapes up")."""

    def __init__(self, compiled: Any, tokenizer: Any, config: EmbedderConfig, *, source: str = "", info: dict[str, Any] | None = None) -> None:
        super().__init__(compiled, tokenizer, config, source=source, info=info)
        self._lock = threading.Lock()  # one infer request, used by one thread at a time
        self._request = compiled.create_infer_request()
        self.precision = compiled_precision(compiled)
        """What OpenVINO computes in: ``fp32`` or ``bf16`` (read back from the compiled model)."""

    @staticmethod
    def compile(path: str | os.PathLike[str], *, threads: int | None = None, device: str | None = None, precision: str = "fp32", strict: bool = True) -> Any:
        """The model file (OpenVINO IR or ONNX) compiled for ``device`` (CPU) with ``threads``
        inference threads (default: torch's setting, so several processes do not oversubscribe),
        computing in ``precision`` (the hint is always set: OpenVINO's own default is bf16 on CPUs
        with bf16 instructions). bf16 on a CPU without them: a ConfigError, or with
        ``strict=False`` a warning and a compile in fp32."""
        ov = require_openvino()
        check_precision(precision)
        if device is not None and not device.lower().startswith("cpu"):
            raise ConfigError(f"device {device!r}: anglekit's OpenVINO backend runs on the CPU; use --backend onnx or torch for GPUs")
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        core = ov.Core()
        settings = {"INFERENCE_NUM_THREADS": int(threads), "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_PRECISION_HINT": PRECISIONS[precision]}
        try:
            model = core.read_model(str(path))
            compiled = core.compile_model(model, "CPU", settings)
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises its own RuntimeError subclasses
            raise ConfigError(f"{path}: not a valid OpenVINO/ONNX model ({type(exc).__name__}: {str(exc)[:300]})") from None
        got = compiled_precision(compiled)
        if got != precision:
            problem = (f"OpenVINO cannot compute in {precision} on this CPU (it would run {got}; bf16 needs "
                       f"{' or '.join(sorted(NATIVE_BF16_FLAGS))})")  # fmt: skip
            if strict:
                raise ConfigError(f"{path}: {problem}; use precision fp32")
            logger.warning("%s: %s: running in fp32", path, problem)
            return OpenVinoEmbedder.compile(path, threads=threads, device=device, precision="fp32")  # asked for, not left to the plugin
        return compiled

    @classmethod
    def from_pretrained(  # type: ignore[override]
        cls,
        folder: str | os.PathLike[str],
        *,
        prompt: str | None = None,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        prompts: dict[str, str] | None = None,
        normalize: bool | None = None,
        max_length: int | None = None,
        threads: int | None = None,
        device: str | None = None,
        precision: str | None = None,
    ) -> OpenVinoEmbedder:
        """Load a folder written by :func:`export_openvino` (or an ONNX folder, converted on load).

        ``precision`` (``fp32``, ``bf16``): what OpenVINO computes in; by default the one the export
        recorded (fp32 for ONNX folders and exports without a record). A recorded bf16 on a CPU
        without bf16 instructions runs in fp32 with a warning; an asked-for one is a ConfigError."""
        path = Path(folder)
        if is_openvino_folder(path):
            model_file, info_file = path / OPENVINO_FILE, OPENVINO_CONFIG
        elif is_onnx_folder(path):
            model_file, info_file = path / ONNX_FILE, ONNX_CONFIG
        else:
            raise ConfigError(f"{path}: not an OpenVINO or ONNX model folder (no {OPENVINO_FILE} or {ONNX_FILE} with {CONFIG_NAME} beside it)")
        config, tokenizer, info = load_exported_parts(
            path,
            info_file,
            prompt=prompt,
            query_prompt=query_prompt,
            document_prompt=document_prompt,
            prompts=prompts,
            normalize=normalize,
            max_length=max_length,
        )
        recorded = info.get("precision", "fp32") if info_file == OPENVINO_CONFIG else "fp32"
        if not isinstance(recorded, str) or recorded not in PRECISIONS:
            raise ConfigError(f"{path / info_file}: precision {recorded!r} is not one of {', '.join(PRECISIONS)}")
        compiled = cls.compile(model_file, threads=threads, device=device, precision=precision or recorded, strict=precision is not None)
        embedder = cls(compiled, tokenizer, config, source=str(path), info=info)
        embedder.model_file = model_file
        return embedder

    @property
    def dim(self) -> int:
        shape = self.session.output(OUTPUTS[0]).get_partial_shape()[-1]
        return int(shape.get_length()) if shape.is_static else int(self.info["hidden_size"])

    def embed_padded(self, batch: dict[str, Any], normalize: bool) -> np.ndarray:
        """Vectors of one padded batch (float32)."""
        with self._lock:
            results = self._request.infer(graph_feeds(batch))
            out = results[self.session.output(OUTPUTS[1] if normalize else OUTPUTS[0])]
            return np.array(out, dtype=np.float32, copy=True)

    def weight_files(self) -> list[Path]:
        """The compiled model file, with the IR's weights beside it."""
        return [self.model_file] + ([self.model_file.with_suffix(".bin")] if self.model_file.suffix == ".xml" else [])


def load_openvino(source: str | os.PathLike[str], settings: LoadSettings, *, threads: int | None = None) -> OpenVinoEmbedder:
    """The ``openvino`` backend's loader (:mod:`anglekit.model.backends`): an OpenVINO or ONNX
    folder compiled for the CPU; ``threads``: its inference threads (default: torch's setting)."""
    return load_exported(OpenVinoEmbedder, "model", source, settings, threads)


__all__ = [
    "BF16_MIN_COSINE",
    "OPENVINO_CONFIG",
    "OPENVINO_FILE",
    "PRECISIONS",
    "OpenVinoEmbedder",
    "compiled_precision",
    "export_openvino",
    "is_openvino_folder",
    "load_openvino",
    "only_openvino_weights",
    "require_openvino",
]
