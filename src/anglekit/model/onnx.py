"""The ONNX backend: export an Embedder's graph, and embed with onnxruntime.

:func:`export_onnx` writes a folder that embeds on its own: ``model.onnx`` (backbone + pooling, with
the pooled and the L2-normalised vectors as outputs; dynamic batch and sequence axes), the tokenizer,
``anglekit_config.json`` (prompts, max length, normalisation) and ``onnx_config.json`` (how it was
made). The export uses ``torch.onnx`` (TorchScript exporter; dynamo as fallback), dynamic int8 quantization and graph
optimisation use onnxruntime's own tools; each export is checked against the torch model before it
is written. :class:`OnnxEmbedder` has the Embedder's encode API.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError
from anglekit.io.atomic import settle_modes, staging_dir
from anglekit.model.backends import has_torch_weights
from anglekit.model.config import CONFIG_NAME, VECTOR_NEUTRAL, EmbedderConfig
from anglekit.model.encoding import EncodeAPI, check_truncate_dim, prepare_tokenizer, tokenize_texts
from anglekit.model.load_settings import FIXED_BY_EXPORT, LoadSettings

ONNX_FILE = "model.onnx"
ONNX_CONFIG = "onnx_config.json"
OUTPUTS = ("sentence_embedding", "normalized_embedding")
OPTIMIZE_LEVELS = ("O1", "O2", "O3")
QUANTIZE = ("int8",)
FP32_TOLERANCE = 1e-4
"""Largest absolute difference from the torch model an fp32 export may show on the check batch."""
INT8_MIN_COSINE = 0.97
"""Smallest cosine between an int8 export's vectors and the torch model's on the check batch."""
CHECK_TEXTS = (
    "A man is playing a guitar.",
    "hi",
    "The old woman walks her small white dog in the park every morning before breakfast, whatever the weather.",
)


def require_runtime(module: str, backend: str, extra: str) -> Any:
    """The runtime package ``module``, or a ConfigError saying which extra installs it."""
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"the {backend} backend needs {module}: pip install 'anglekit[{extra}]'")
    return importlib.import_module(module)


def require_onnxruntime() -> Any:
    """onnxruntime, or a ConfigError saying how to get it."""
    return require_runtime("onnxruntime", "ONNX", "onnx")


def is_export_folder(path: str | os.PathLike[str], model_file: str) -> bool:
    """Whether ``path`` is a folder with the exported ``model_file`` and the anglekit config beside it."""
    folder = Path(path)
    return folder.is_dir() and (folder / model_file).is_file() and (folder / CONFIG_NAME).is_file()


def only_exported_weights(path: str | os.PathLike[str], model_file: str, *, others: tuple[str, ...] = ()) -> bool:
    """Whether ``path`` is an export folder of ``model_file`` holding no PyTorch weights, no LoRA
    adapters and none of the ``others`` files (then that export's backend is the only choice)."""
    folder = Path(path)
    return is_export_folder(folder, model_file) and not has_torch_weights(folder) and not any((folder / name).is_file() for name in others)


def is_onnx_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder written by :func:`export_onnx` (an ONNX model and its config)."""
    return is_export_folder(path, ONNX_FILE)


def only_onnx_weights(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds ONNX weights and no PyTorch ones (then the ONNX backend is the only choice)."""
    return only_exported_weights(path, ONNX_FILE)


class _Graph:
    """What is exported: the embedder's forward (pooled vectors) and their normalisation.

    Positions are counted from each row's first real token, so left and right padding export to
    one graph (for absolute positions and right padding this equals the default positions of every
    real token; padding is masked out of every pooling).
    """

    def __new__(cls, embedder: Any) -> Any:
        import torch

        class Graph(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embedder = embedder

            def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                extra = {}
                if embedder._takes_position_ids:
                    extra["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
                pooled = self.embedder(input_ids, attention_mask, **extra).float()
                return pooled, torch.nn.functional.normalize(pooled, p=2.0, dim=1)

        return Graph().eval()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep the exporter's and the quantizer's progress lines and advice out of the user's terminal
    (their failures still raise, with the reason)."""
    loggers = [logging.getLogger(name) for name in ("", "torch.onnx", "torch._dynamo", "torch.export", "onnxscript")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _check_exportable(embedder: Any) -> None:
    if getattr(embedder, "has_lora", False):
        raise ConfigError("the model carries LoRA adapters: merge them first (anglekit merge-lora, or model.merge_lora()), then export")
    if getattr(embedder, "quantization_method", None) is not None:
        raise ConfigError("a k-bit (bitsandbytes) model cannot be exported to ONNX; load it in fp32 or bf16")


@contextlib.contextmanager
def _eager_attention(embedder: Any) -> Iterator[None]:
    """Trace the backbone with its eager attention (plain MatMul/Softmax, the pattern onnxruntime's
    kernels and fusions know) rather than SDPA; the model's own setting is restored afterwards."""
    backbone = getattr(embedder, "backbone", None)
    config = getattr(backbone, "config", None)
    before = getattr(config, "_attn_implementation", None)
    switch = before not in (None, "eager") and hasattr(backbone, "set_attn_implementation")
    if switch:
        try:
            backbone.set_attn_implementation("eager")
        except Exception:  # noqa: BLE001 - a model without an eager path keeps its own
            switch = False
    try:
        yield
    finally:
        if switch:
            backbone.set_attn_implementation(before)


def _export_graph(graph: Any, example: dict[str, Any], path: Path, opset: int) -> str:
    """Export ``graph`` to ``path``; returns the exporter used.

    torch.onnx's TorchScript exporter first: on BERT-like encoders its graph runs ~1.3x faster in
    onnxruntime than the dynamo exporter's (measured on all-MiniLM-L6-v2, 2 threads) and matches
    onnxruntime's fusion patterns. The dynamo exporter is the fallback (and the only one once torch
    drops TorchScript); ConfigError with both reasons when neither can export the model.
    """
    import torch

    inputs = (example["input_ids"], example["attention_mask"])
    names = {"input_names": ["input_ids", "attention_mask"], "output_names": list(OUTPUTS)}
    failures = []
    with torch.no_grad(), _quiet(), _eager_attention(graph.embedder):
        try:
            axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
            torch.onnx.export(graph, inputs, str(path), dynamic_axes=axes, opset_version=min(opset, 17), dynamo=False, **names)
            return "torch.onnx (torchscript)"
        except Exception as exc:  # noqa: BLE001 - try the other exporter, keep the reason
            failures.append(f"torchscript: {type(exc).__name__}: {str(exc)[:300]}")
            for leftover in (path, path.with_name(path.name + ".data")):
                leftover.unlink(missing_ok=True)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    with torch.no_grad(), _quiet():
        try:
            torch.onnx.export(
                graph, inputs, str(path), dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}), opset_version=opset, dynamo=True, verbose=False, **names
            )
            return "torch.onnx (dynamo)"
        except Exception as exc:  # noqa: BLE001 - any exporter failure is "cannot be exported", with its reason
            failures.append(f"dynamo: {type(exc).__name__}: {str(exc)[:300]}")
    raise ConfigError("this model cannot be exported to ONNX: " + "; ".join(failures))


def export_onnx(
    embedder: Any,
    output_dir: str | os.PathLike[str],
    *,
    quantize: str | None = None,
    optimize: str | None = None,
    opset: int = 18,
) -> Path:
    """Write ``embedder`` as an ONNX folder (see the module doc); returns the folder.

    ``quantize="int8"``: dynamic int8 weights (onnxruntime ``quantize_dynamic``). ``optimize``:
    onnxruntime's graph optimisations, ``O1`` basic; ``O2`` the transformer fusions of
    onnxruntime's optimizer (attention, skip layer norm, bias GELU; BERT-like encoders, see
    :func:`_fuse_transformer`) then the extended level; ``O3`` the fusions then every level (with
    layout changes for this CPU). With int8, the fused attention is quantized too (``QAttention``). The export is compared with the torch model on a check batch (fp32: max
    difference <= 1e-4; int8: cosine >= 0.97) and refused if it embeds differently. Everything is
    written to a staging folder first, so an interrupted export leaves no half-written model.
    """
    import torch

    ort = require_onnxruntime()
    if quantize is not None and quantize not in QUANTIZE:
        raise ConfigError(f"quantize must be one of {', '.join(QUANTIZE)} or None, got {quantize!r}")
    if optimize is not None and optimize not in OPTIMIZE_LEVELS:
        raise ConfigError(f"optimize must be one of {', '.join(OPTIMIZE_LEVELS)} or None, got {optimize!r}")
    _check_exportable(embedder)
    if importlib.util.find_spec("onnxscript") is None:
        raise ConfigError("the ONNX export needs onnxscript (torch.onnx's exporter): pip install 'anglekit[onnx]'")
    target = Path(output_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(target)
    try:
        graph = _Graph(embedder).to("cpu")
        example = embedder.pad(embedder.tokenize_unpadded(["a b", "a longer example sentence to export"]), device=torch.device("cpu"))
        raw = staging / "raw.onnx"
        exporter = _export_graph(graph, example, raw, opset)
        current, fused = _optimize_and_quantize(ort, embedder, raw, staging, optimize, quantize)
        final = staging / ONNX_FILE
        _copy_onnx(current, final)
        for stage in ("raw", "fused", "optimized", "quantized"):
            (staging / f"{stage}.onnx").unlink(missing_ok=True)
            (staging / f"{stage}.onnx.data").unlink(missing_ok=True)
        embedder.tokenizer.save_pretrained(staging)
        embedder.config.save(staging)
        agreement = _check_against_torch(embedder, final, quantize)
        info = {
            "format": 1, "onnx_file": ONNX_FILE, "outputs": list(OUTPUTS), "opset": opset, "quantize": quantize, "optimize": optimize,
            "fused_operators": fused, "exporter": exporter, "torch": torch.__version__, "onnxruntime": ort.__version__,
            "hidden_size": int(embedder.dim), "source": embedder.source, "source_fingerprint": embedder.fingerprint(), "check": agreement,
        }  # fmt: skip
        (staging / ONNX_CONFIG).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        settle_modes(staging)
        target.mkdir(exist_ok=True)
        for path in sorted(staging.iterdir()):
            os.replace(path, target / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _optimize_and_quantize(ort: Any, embedder: Any, raw: Path, staging: Path, optimize: str | None, quantize: str | None) -> tuple[Path, dict[str, int]]:
    """The exported graph ``raw`` through the transformer fusions (O2, O3), onnxruntime's graph
    optimisation (``optimize``) and dynamic int8 (``quantize``), each stage a file in ``staging``:
    (the last stage's file, the fused operators)."""
    current = raw
    fused: dict[str, int] = {}
    if optimize in ("O2", "O3"):
        fused = _fuse_transformer(embedder, current, staging / "fused.onnx")
        current = staging / "fused.onnx" if fused else current
    if optimize is not None:
        levels = {
            "O1": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "O2": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "O3": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        options = ort.SessionOptions()
        options.graph_optimization_level = levels[optimize]
        options.optimized_model_filepath = str(staging / "optimized.onnx")
        ort.InferenceSession(str(current), options, providers=["CPUExecutionProvider"])
        current = staging / "optimized.onnx"
    if quantize == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # Per-channel weight scales (as optimum's avx512_vnni / arm64 dynamic configs): per-tensor
        # scales lose too much (cosine to the fp32 vectors ~0.93 on MiniLM, ~0.99 per channel).
        with _quiet():
            quantize_dynamic(
                str(current), str(staging / "quantized.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                extra_options={"DefaultTensorType": 1},  # FLOAT, for tensors shape inference leaves untyped
            )  # fmt: skip
        current = staging / "quantized.onnx"
    return current, fused


def _fuse_transformer(embedder: Any, source: Path, destination: Path) -> dict[str, int]:
    """onnxruntime's transformer fusions (``onnxruntime.transformers.optimizer``, BERT patterns) on
    ``source``, saved to ``destination``; returns the fused operators and their counts, empty (and
    nothing written) for a decoder backbone, whose graphs these patterns do not describe, or when
    nothing matched. The result is checked against torch like every export."""
    from anglekit.model.loading import is_causal_lm

    model_config = getattr(getattr(embedder, "backbone", None), "config", None)
    if model_config is None or is_causal_lm(model_config):
        return {}
    from onnxruntime.transformers.optimizer import optimize_model

    heads = int(getattr(model_config, "num_attention_heads", 0) or 0)
    hidden = int(getattr(model_config, "hidden_size", 0) or 0)
    with _quiet():
        optimized = optimize_model(str(source), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0)
    stats = {name: int(count) for name, count in optimized.get_fused_operator_statistics().items() if count}
    if stats:
        optimized.save_model_to_file(str(destination))
    return stats


def _copy_onnx(source: Path, destination: Path) -> None:
    """Save ``source`` as one self-contained file ``destination`` (external data folded in when the
    model is under 2 GB, else written beside it as ``destination.data``)."""
    import onnx

    model = onnx.load(str(source), load_external_data=True)
    large = model.ByteSize() > 2_000_000_000
    onnx.save(model, str(destination), save_as_external_data=large, location=destination.name + ".data" if large else None)


def _check_against_torch(embedder: Any, path: Path, quantize: str | None) -> dict[str, float]:
    """Compare the exported model with the torch one on a check batch; ConfigError when it differs."""
    session = OnnxEmbedder.session_for(path, threads=None)
    return check_against_torch(embedder, lambda batch: _run(session, batch)[0], quantize, "ONNX")


def check_against_torch(
    embedder: Any,
    pooled: Callable[[dict[str, Any]], np.ndarray],
    quantize: str | None,
    runtime: str,
    *,
    min_cosine: float | None = None,
    what: str | None = None,
) -> dict[str, float]:
    """Compare an exported graph (``pooled(padded batch)`` -> its pooled vectors) with the torch
    model on a check batch: fp32 within :data:`FP32_TOLERANCE`, int8 at a cosine of at least
    :data:`INT8_MIN_COSINE` (``min_cosine`` asks for a cosine check at that bound instead, e.g. for
    bf16 compute); the figure, or a ConfigError naming ``runtime`` and ``what`` runs (int8, bf16)."""
    reference = embedder.encode(list(CHECK_TEXTS), normalize=False, long_text="truncate", truncate_dim=embedder.dim)  # the graph: one window, every coordinate
    exported = pooled(embedder.pad(embedder.tokenize_unpadded(list(CHECK_TEXTS))))  # one batch, input order
    if quantize is None and min_cosine is None:
        difference = float(np.abs(exported - reference).max())
        if difference > FP32_TOLERANCE:
            raise ConfigError(f"the {runtime} export differs from the model by {difference:.2e} (> {FP32_TOLERANCE}); not written")
        return {"max_abs_difference": difference}
    bound = INT8_MIN_COSINE if min_cosine is None else min_cosine
    label = " ".join(part for part in (quantize, what) if part) or "exported"
    cosine = rowwise_cosine(exported, reference)
    if float(cosine.min()) < bound:
        raise ConfigError(f"the {label} {runtime} export's vectors are too far from the model's (cosine {cosine.min():.4f} < {bound}); not written")
    return {"min_cosine": float(cosine.min())}


def rowwise_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return num / np.maximum(den, 1e-12)


def graph_feeds(batch: dict[str, Any]) -> dict[str, np.ndarray]:
    """The exported graph's inputs from a padded batch (torch tensors or arrays): contiguous int64."""
    return {name: np.ascontiguousarray(batch[name].numpy() if hasattr(batch[name], "numpy") else batch[name], dtype=np.int64)
            for name in ("input_ids", "attention_mask")}  # fmt: skip


def _run(session: Any, batch: dict[str, Any]) -> list[np.ndarray]:
    return session.run(list(OUTPUTS), graph_feeds(batch))


def load_exported_parts(path: Path, info_file: str, **overrides: Any) -> tuple[EmbedderConfig, Any, dict[str, Any]]:
    """(config with ``overrides`` applied, tokenizer, the export's info file) of an exported folder;
    ConfigError naming the file that is broken."""
    from transformers import AutoTokenizer

    from anglekit.model.config import EmbedderSettings

    saved = EmbedderConfig.load(path)
    config = EmbedderSettings(**overrides).over(EmbedderSettings.of(saved)).resolve(source=str(path))
    info: dict[str, Any] = {}
    if (path / info_file).is_file():
        try:
            info = json.loads((path / info_file).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path / info_file}: not valid JSON ({exc})") from None
        if not isinstance(info, dict):
            raise ConfigError(f"{path / info_file}: expected a JSON object (the export's record), got {type(info).__name__}")
        hidden = info.get("hidden_size")
        if hidden is not None and (not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1):
            raise ConfigError(f"{path / info_file}: hidden_size must be a positive integer, got {type(hidden).__name__} {json.dumps(hidden)[:80]}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot load the tokenizer ({exc})") from None
    return config, tokenizer, info


def check_providers(session: Any, asked: Sequence[Any], device: str | None) -> None:
    """ConfigError unless ``session`` runs on the first execution provider ``asked`` for."""
    first = asked[0][0] if isinstance(asked[0], tuple) else asked[0]
    running = list(session.get_providers())
    if not running or running[0] != first:
        raise ConfigError(f"device {device or 'cpu'!r}: onnxruntime did not start {first} (it runs {', '.join(running) or 'nothing'}); "
                          "check the CUDA and cuDNN libraries onnxruntime-gpu needs")  # fmt: skip


def check_onnx_precision(precision: str | None) -> None:
    """onnxruntime runs the exported fp32 graph in fp32: ``precision`` None or fp32, else a ConfigError."""
    if precision not in (None, "fp32"):
        raise ConfigError(f"precision {precision!r}: onnxruntime runs the exported graph in fp32; bf16 is for --backend torch or openvino")


class OnnxEmbedder(EncodeAPI):
    """An exported model run by onnxruntime, with :class:`~anglekit.model.embedder.Embedder`'s encode API."""

    backend = "onnx"
    precision = "fp32"
    """What the runtime computes in: onnxruntime runs an fp32 graph in fp32 (CUDA: TF32 off)."""
    pad_multiple = 1
    """Batches are padded to a multiple of this many tokens (onnxruntime: 1, exactly the longest
    text; padding to 8 measured 0.79-0.95x on MiniLM, ``benchmarks/bench_ov_padding.py``)."""

    def __init__(self, session: Any, tokenizer: Any, config: EmbedderConfig, *, source: str = "", info: dict[str, Any] | None = None) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.config = config
        self.source = source
        self.info = info or {}
        prepare_tokenizer(tokenizer, config, source)

    @staticmethod
    def session_for(path: str | os.PathLike[str], *, threads: int | None = None, device: str | None = None) -> Any:
        """An onnxruntime session for the model file: ``threads`` intra-op threads (default: torch's
        setting, so several processes configured for one thread each do not oversubscribe).

        ``device`` ``cuda[:N]`` puts the CUDA execution provider first, with TF32 off (onnxruntime
        turns it on by default, which is not fp32); a session that did not get the provider it asked
        for (onnxruntime falls back to the CPU with only a warning) is a ConfigError."""
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        if threads is None:
            try:
                import torch

                threads = torch.get_num_threads()
            except ImportError:  # pragma: no cover - torch is a dependency
                threads = 0
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers: list[Any] = ["CPUExecutionProvider"]
        if device is not None and device.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise ConfigError(f"device {device!r}: this onnxruntime has no CUDA provider (pip install onnxruntime-gpu)")
            index = int(device.partition(":")[2] or 0)
            providers = [("CUDAExecutionProvider", {"device_id": index, "use_tf32": 0}), *providers]
        try:
            session = ort.InferenceSession(str(path), options, providers=providers)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise ConfigError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {str(exc)[:300]})") from None
        check_providers(session, providers, device)
        return session

    @classmethod
    def from_pretrained(
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
    ) -> OnnxEmbedder:
        """Load a folder written by :func:`export_onnx`. Prompts, normalisation and max length may be
        overridden; the pooling is part of the graph. ``precision``: fp32 only (see
        :func:`check_onnx_precision`)."""
        check_onnx_precision(precision)
        path = Path(folder)
        if not is_onnx_folder(path):
            raise ConfigError(f"{path}: not an ONNX model folder (no {ONNX_FILE} with {CONFIG_NAME} beside it)")
        config, tokenizer, info = load_exported_parts(
            path,
            ONNX_CONFIG,
            prompt=prompt,
            query_prompt=query_prompt,
            document_prompt=document_prompt,
            prompts=prompts,
            normalize=normalize,
            max_length=max_length,
        )
        session = cls.session_for(path / ONNX_FILE, threads=threads, device=device)
        return cls(session, tokenizer, config, source=str(path), info=info)

    # ------------------------------------------------------------------ the Embedder's API
    @property
    def dim(self) -> int:
        shape = self.session.get_outputs()[0].shape
        if isinstance(shape[-1], int):
            return int(shape[-1])
        return int(self.info["hidden_size"])

    @property
    def output_dim(self) -> int:
        """The width of :meth:`encode`'s vectors by default: ``config.truncate_dim`` or :attr:`dim`."""
        return self.config.truncate_dim or self.dim

    @property
    def has_lora(self) -> bool:
        return False

    def tokenize_unpadded(self, texts: Sequence[str], role: str | None = None) -> list[list[int]]:
        """Token ids of each text (the role's prompt applied, truncated to max_length)."""
        return tokenize_texts(self.tokenizer, self.config, texts, role)

    def pad(self, sequences: Sequence[Sequence[int]], device: Any = None) -> dict[str, np.ndarray]:
        from anglekit.model.padding import pad_token_ids

        left = self.tokenizer.padding_side == "left"
        out = pad_token_ids(sequences, self.tokenizer.pad_token_id, left=left, multiple=self.pad_multiple, cap=self.config.max_length)
        return {k: v.numpy() for k, v in out.items()}

    def embed_padded(self, batch: dict[str, Any], normalize: bool) -> np.ndarray:
        """Vectors of one padded batch (float32)."""
        pooled, normalized = _run(self.session, batch)
        return normalized if normalize else pooled

    def weight_files(self) -> list[Path]:
        """The files that hold the model (what :meth:`fingerprint` hashes)."""
        return [Path(self.source) / ONNX_FILE]

    def fingerprint(self) -> str:
        """A stable id of the model's files and its embedding settings (for caches and indexes)."""
        digest = hashlib.sha256()
        settings = {k: v for k, v in self.config.to_dict().items() if k not in VECTOR_NEUTRAL}
        digest.update(json.dumps(settings, sort_keys=True).encode())
        for path in self.weight_files():
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(chunk)
        return digest.hexdigest()[:16]


def load_exported(runtime: Any, what: str, source: str | os.PathLike[str], settings: LoadSettings, threads: int | None) -> Any:
    """An exported folder loaded by ``runtime`` (:class:`OnnxEmbedder` or a subclass) with the
    ``settings`` that may still change: prompts, normalisation, max length, device, precision,
    ``truncate_dim`` and the long-text settings. The others were fixed by the export (``what``
    names the model in the error)."""
    given = settings.given()
    fixed = sorted(key for key in FIXED_BY_EXPORT if key in given)
    if fixed:
        raise ConfigError(f"{', '.join(fixed)}: fixed when the {what} was exported; export again to change them")
    exported = runtime.from_pretrained(
        source, prompt=settings.prompt, query_prompt=settings.query_prompt, document_prompt=settings.document_prompt,
        prompts=settings.prompts, normalize=settings.normalize, max_length=settings.max_length, threads=threads, device=settings.device, precision=settings.precision,
    )  # fmt: skip
    later = {key: value for key, value in settings.embedding().items() if key in _APPLIED_AFTER_LOADING}
    if "truncate_dim" in later:
        check_truncate_dim(later["truncate_dim"], exported.dim)
    if later:
        exported.config = EmbedderConfig.from_dict({**exported.config.to_dict(), **later}, source=os.fspath(source))
    return exported


_APPLIED_AFTER_LOADING = ("truncate_dim", "long_text", "long_text_window", "long_text_stride", "long_text_max_chunks")
"""Inference settings an exported model takes over its config once loaded (applied by the encode loop)."""


def load_onnx(source: str | os.PathLike[str], settings: LoadSettings, *, threads: int | None = None) -> OnnxEmbedder:
    """The ``onnx`` backend's loader (:mod:`anglekit.model.backends`); ``threads``: onnxruntime's
    intra-op threads (default: torch's setting)."""
    return load_exported(OnnxEmbedder, "ONNX model", source, settings, threads)


__all__ = ["ONNX_CONFIG", "ONNX_FILE", "OnnxEmbedder", "export_onnx", "is_onnx_folder", "load_exported", "load_onnx", "only_onnx_weights"]
