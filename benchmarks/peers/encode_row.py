#!/usr/bin/env python
"""One row of ``benchmarks/bench_encode.py``, in its own process (so peak RSS is the row's own).

Two sub-commands, both run by bench_encode.py (in anglekit's ``.venv`` or in ``.venv-st-onnx``):

``prepare``: write the models the rows load, before any row is timed (so no row pays for an
export in its time or its peak RSS)::

    encode_row.py prepare --what anglekit --out-dir D --exports fp32,int8,int8-O2,int8-O3
        anglekit's export_onnx into D/<name>/ (fp32: plain; int8: quantize="int8";
        int8-O2 / int8-O3: quantize="int8", optimize="O2" / "O3"), and export_openvino (ov-fp32: plain; ov-bf16: precision="bf16"; ov-int8:
        quantize="int8", NNCF int8 weights; ov-int8-static: quantize="int8-static", NNCF int8 weights and
        activations calibrated on 512 STS-B train sentences).
    encode_row.py prepare --what st --out-dir D --quant-config avx512_vnni [--openvino]
        a copy of the model folder in D/, SentenceTransformer(D, backend="onnx") saved to
        D/onnx/model.onnx, export_dynamic_quantized_onnx_model(model, CONFIG, D) ->
        D/onnx/model_qint8_<CONFIG>.onnx, and with --openvino backend="openvino" saved to
        D/openvino/openvino_model.xml and export_static_quantized_openvino_model (its default
        OVQuantizationConfig, calibrated on the same 512 STS-B train sentences as anglekit's static
        row) -> D/openvino/openvino_model_qint8_quantized.xml.

``run``: load one model, warm up, encode the short and the long texts of ``--inputs`` (written by
bench_encode.py) ``--repeats`` times, and print one JSON line: best sentences/s of each, peak
RSS, STS-B test Spearman x100 from the short-text vectors, the threads each runtime really uses;
the vectors (L2-normalised, input order) go to ``--vectors-out`` (.npz: short, long).

Kinds (``--kind``) and how each is pinned to ``--threads N`` (the parent also sets
OMP_NUM_THREADS=MKL_NUM_THREADS=N and TOKENIZERS_PARALLELISM=false for every row):

- ``anglekit-torch``: ``Embedder.from_pretrained(path, device="cpu")``; torch.set_num_threads(N).
- ``anglekit-onnx``: ``OnnxEmbedder.from_pretrained(path, threads=N)`` (ORT intra-op N, inter-op 1).
- ``st-torch``: ``SentenceTransformer(path, device="cpu")``; torch.set_num_threads(N).
- ``st-onnx``: ``SentenceTransformer(path, backend="onnx", model_kwargs={"file_name": F,
  "provider": "CPUExecutionProvider", "session_options": <intra-op N, inter-op 1>})``.
- ``st-openvino``: ``SentenceTransformer(path, backend="openvino",
  model_kwargs={"ov_config": {"INFERENCE_NUM_THREADS": N, "PERFORMANCE_HINT": "LATENCY"}})``
  (with ``--precision``: ``INFERENCE_PRECISION_HINT`` too; without it, OpenVINO's default, bf16 on
  CPUs with bf16 instructions).
- ``anglekit-openvino``: ``OpenVinoEmbedder.from_pretrained(path, threads=N)`` (anglekit's OpenVINO
  backend: INFERENCE_NUM_THREADS N, PERFORMANCE_HINT LATENCY, one stream, the precision the export
  recorded).

Every row reports the precision it really ran in (``precision``), read back from the runtime: the
weights' dtype for torch, the compiled model's INFERENCE_PRECISION_HINT for OpenVINO, fp32 or
dynamic int8 for onnxruntime.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402  (sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE on import)

import numpy as np  # noqa: E402

KINDS = ("anglekit-torch", "anglekit-onnx", "anglekit-openvino", "st-torch", "st-onnx", "st-openvino")
ANGLEKIT_EXPORTS = {
    "fp32": {},
    "int8": {"quantize": "int8"},
    "int8-O2": {"quantize": "int8", "optimize": "O2"},
    "int8-O3": {"quantize": "int8", "optimize": "O3"},
    "ov-fp32": {},
    "ov-bf16": {"precision": "bf16"},
    "ov-int8": {"quantize": "int8"},
    "ov-int8-static": {"quantize": "int8-static"},
}
PRECISIONS = ("fp32", "bf16")
"""``--precision`` of a row: torch rows load their weights in it; OpenVINO rows set it as the
inference precision hint (anglekit: recorded with the export; sentence-transformers: ov_config)."""
"""anglekit exports by name: ``ov-*`` through ``export_openvino``, the others through ``export_onnx``."""


def _import_anglekit() -> None:
    """anglekit from this checkout's src/ when the venv does not have it (``.venv-st-onnx``)."""
    try:
        import anglekit  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(common.REPO_ROOT / "src"))


def _ov_config(threads: int, precision: str | None = None) -> dict[str, str]:
    """optimum-intel's ov_config for ``threads``; ``precision`` sets INFERENCE_PRECISION_HINT (None:
    OpenVINO's own default, which is bf16 on CPUs with bf16 instructions)."""
    config = {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY"}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = {"fp32": "f32", "bf16": "bf16"}[precision]
    return config


def _ov_precision(hint: Any) -> str:
    """anglekit's name for an OpenVINO INFERENCE_PRECISION_HINT read back from a compiled model."""
    text = str(hint).lower()
    return "bf16" if "bf" in text else "fp16" if "f16" in text else "fp32"


def _torch_precision(module: Any) -> str:
    import torch

    names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    return next((names[p.dtype] for p in module.parameters() if p.dtype in names), "fp32")


# --------------------------------------------------------------------------- prepare
CALIBRATION_TEXTS = 512


def calibration_texts() -> list[str]:
    """Static int8's calibration set: 512 unique STS-B *train* sentences (every 7th in sorted order;
    the rows are scored on STS-B test, which calibration never sees)."""
    s1, s2, _ = common.read_stsb("train")
    return sorted(set(s1) | set(s2))[::7][:CALIBRATION_TEXTS]


def prepare_anglekit(out_dir: Path, exports: list[str], threads: int) -> dict[str, Any]:
    common.set_threads(threads)
    from anglekit import Embedder
    from anglekit.model.onnx import export_onnx

    embedder = Embedder.from_pretrained(str(common.minilm_dir()), device="cpu")
    done: dict[str, Any] = {}
    for name in exports:
        started = time.perf_counter()
        if name.startswith("ov-"):
            from anglekit.model.openvino import export_openvino

            options = dict(ANGLEKIT_EXPORTS[name])
            if options.get("quantize") == "int8-static":
                options["calibration_texts"] = calibration_texts()
            folder = export_openvino(embedder, out_dir / name, **options)
            info_file, weights = "openvino_config.json", "openvino_model.bin"
        else:
            folder = export_onnx(embedder, out_dir / name, **ANGLEKIT_EXPORTS[name])
            info_file, weights = "onnx_config.json", "model.onnx"
        info = json.loads((folder / info_file).read_text(encoding="utf-8"))
        done[name] = {
            "path": str(folder),
            "seconds": round(time.perf_counter() - started, 2),
            "exporter": info.get("exporter"),
            "bytes": (folder / weights).stat().st_size,
            "check": info.get("check"),
        }
    return {"what": "anglekit", "exports": done, "versions": common.versions("anglekit", "torch", "onnxruntime", "onnx", "onnxscript")}


def prepare_st(out_dir: Path, quant_config: str, openvino: bool, threads: int) -> dict[str, Any]:
    common.set_threads(threads)
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    # A copy: the exports are written into the model folder, the shared cache stays untouched.
    shutil.copytree(common.minilm_dir(), out_dir, dirs_exist_ok=True)
    done: dict[str, Any] = {}
    started = time.perf_counter()
    model = SentenceTransformer(str(out_dir), backend="onnx", device="cpu", model_kwargs={"provider": "CPUExecutionProvider"})
    model.save_pretrained(str(out_dir))
    done["onnx"] = {"file_name": "onnx/model.onnx", "seconds": round(time.perf_counter() - started, 2)}
    started = time.perf_counter()
    export_dynamic_quantized_onnx_model(model, quant_config, str(out_dir))
    name = f"onnx/model_qint8_{quant_config}.onnx"
    if not (out_dir / name).is_file():
        raise FileNotFoundError(f"export_dynamic_quantized_onnx_model wrote no {name}: {sorted(p.name for p in (out_dir / 'onnx').iterdir())}")
    done["onnx-int8"] = {"file_name": name, "quant_config": quant_config, "seconds": round(time.perf_counter() - started, 2)}
    del model
    if openvino:
        started = time.perf_counter()
        ov_model = SentenceTransformer(str(out_dir), backend="openvino", device="cpu", model_kwargs={"ov_config": _ov_config(threads)})
        ov_model.save_pretrained(str(out_dir))
        done["openvino"] = {"file_name": "openvino/openvino_model.xml", "seconds": round(time.perf_counter() - started, 2)}
        started = time.perf_counter()
        try:
            done["openvino-int8-static"] = {
                **export_st_static_openvino(ov_model, out_dir, calibration_texts()),
                "seconds": round(time.perf_counter() - started, 2),
            }
        except Exception as exc:  # noqa: BLE001 - its row reports the failure; the other rows still run
            done["openvino-int8-static"] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
    for value in done.values():
        if "file_name" not in value:
            continue
        files = [out_dir / value["file_name"]]
        if files[0].suffix == ".xml":
            files.append(files[0].with_suffix(".bin"))
        value["bytes"] = sum(f.stat().st_size for f in files if f.is_file())
    return {
        "what": "st",
        "path": str(out_dir),
        "exports": done,
        "versions": common.versions("sentence-transformers", "transformers", "optimum", "optimum-onnx", "onnxruntime", "torch", "openvino", "optimum-intel"),
    }


def export_st_static_openvino(model: Any, out_dir: Path, texts: list[str]) -> dict[str, Any]:
    """sentence-transformers' own static int8 OpenVINO export (``export_static_quantized_openvino_model``
    with ``OVQuantizationConfig(num_samples=len(texts))``, its defaults otherwise), calibrated on the
    same 512 STS-B train sentences as anglekit's static row. Its calibration set is a hub dataset
    (GLUE SST-2 by default), not reachable offline: ``datasets.load_dataset``, which optimum-intel
    calls for it, returns these texts instead; everything after (shuffle, sample, ST's tokenization
    padded to 384) is the library's own."""
    import datasets
    from optimum.intel import OVQuantizationConfig
    from sentence_transformers.backend import export_static_quantized_openvino_model

    original = datasets.load_dataset

    def offline(path: str, *args: Any, **kwargs: Any) -> Any:  # kwargs: name (the config), split, ...: one table here
        return datasets.Dataset.from_dict({"sentence": list(texts)})

    datasets.load_dataset = offline
    try:
        export_static_quantized_openvino_model(
            model,
            OVQuantizationConfig(num_samples=len(texts)),
            str(out_dir),
            dataset_name="stsb-train-512",
            dataset_config_name="default",
            dataset_split="train",
            column_name="sentence",
        )
    finally:
        datasets.load_dataset = original
    found = sorted((out_dir / "openvino").glob("openvino_model_qint8_quantized.xml"))
    if not found:
        raise FileNotFoundError(
            f"export_static_quantized_openvino_model wrote no openvino_model_qint8_quantized.xml: {sorted(p.name for p in (out_dir / 'openvino').iterdir())}"
        )
    return {"file_name": f"openvino/{found[0].name}", "calibration_texts": len(texts), "quantization_config": f"OVQuantizationConfig(num_samples={len(texts)})"}


def load(
    kind: str, path: str, file_name: str | None, threads: int, precision: str | None = None
) -> tuple[Callable[[list[str], int], np.ndarray], dict[str, Any]]:
    """(encode(texts, batch_size) -> normalised float32 vectors, details) for one kind of row."""
    if kind in ("anglekit-torch", "st-torch"):
        common.set_threads(threads)
    if kind == "anglekit-torch":
        _import_anglekit()
        import torch

        from anglekit import Embedder

        model = Embedder.from_pretrained(path, device="cpu", precision=precision)
        details = {"torch_threads": torch.get_num_threads(), "max_length": model.config.max_length, "precision": model.precision}
        return (lambda texts, bs: model.encode(texts, batch_size=bs, normalize=True)), details
    if kind == "anglekit-onnx":
        _import_anglekit()
        from anglekit.model.onnx import OnnxEmbedder

        model = OnnxEmbedder.from_pretrained(path, threads=threads, precision=precision)
        options = model.session.get_session_options()
        quantized = model.info.get("quantize")
        details = {
            "ort_intra_op_threads": options.intra_op_num_threads,
            "ort_inter_op_threads": options.inter_op_num_threads,
            "max_length": model.config.max_length,
            "export_config": model.info,
            "providers": model.session.get_providers(),
            "precision": "int8 dynamic" if quantized else model.precision,
        }
        return (lambda texts, bs: model.encode(texts, batch_size=bs, normalize=True)), details
    if kind == "anglekit-openvino":
        _import_anglekit()
        from anglekit.model.openvino import OpenVinoEmbedder

        model = OpenVinoEmbedder.from_pretrained(path, threads=threads, precision=precision)
        quantized = model.info.get("quantize")
        details = {
            "openvino_inference_num_threads": int(model.session.get_property("INFERENCE_NUM_THREADS")),
            "openvino_inference_precision": str(model.session.get_property("INFERENCE_PRECISION_HINT")),
            "max_length": model.config.max_length,
            "export_config": model.info,
            "precision": model.precision + (f", {quantized}" if quantized else ""),
        }
        return (lambda texts, bs: model.encode(texts, batch_size=bs, normalize=True)), details
    if kind.startswith("st-"):
        import torch
        from sentence_transformers import SentenceTransformer

        model_kwargs: dict[str, Any] = {}
        backend = {"st-torch": "torch", "st-onnx": "onnx", "st-openvino": "openvino"}[kind]
        if backend == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            model_kwargs = {"provider": "CPUExecutionProvider", "session_options": options}
        elif backend == "openvino":
            model_kwargs = {"ov_config": _ov_config(threads, precision)}
        elif precision is not None:
            model_kwargs = {"dtype": {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]}
        if file_name:
            model_kwargs["file_name"] = file_name
        model = SentenceTransformer(path, device="cpu", backend=backend, model_kwargs=model_kwargs or None)
        details: dict[str, Any] = {"max_length": model.max_seq_length, "modules": [type(m).__name__ for m in model]}
        inner = getattr(model, "transformers_model", None)
        if backend == "torch":
            details["torch_threads"] = torch.get_num_threads()
            details["precision"] = _torch_precision(model)
        elif backend == "onnx":
            session = getattr(inner, "session", None) or getattr(inner, "model", None)
            options = session.get_session_options()
            details.update(
                {
                    "ort_intra_op_threads": options.intra_op_num_threads,
                    "ort_inter_op_threads": options.inter_op_num_threads,
                    "onnx_file": str(getattr(inner, "path", "") or getattr(inner, "model_path", "")),
                    "precision": "int8 dynamic" if file_name and "qint8" in file_name else "fp32",
                }
            )
        else:

            def late() -> dict[str, Any]:  # optimum-intel compiles on first use: read after the warm-up
                compiled = getattr(inner, "request", None)  # an openvino CompiledModel
                if compiled is None or not hasattr(compiled, "get_property"):
                    return {}
                hint = compiled.get_property("INFERENCE_PRECISION_HINT")
                static = ", int8-static" if file_name and "qint8" in file_name else ""
                return {
                    "openvino_inference_num_threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
                    "openvino_inference_precision": str(hint),
                    "precision": _ov_precision(hint) + static,
                }

            details["_late"] = late
            details["ov_config"] = dict(getattr(inner, "ov_config", {}) or {})

        def encode(texts: list[str], bs: int) -> np.ndarray:
            return model.encode(texts, batch_size=bs, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)

        return encode, details
    raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")


# --------------------------------------------------------------------------- run
def run_row(args: argparse.Namespace) -> dict[str, Any]:
    inputs = json.loads(Path(args.inputs).read_text(encoding="utf-8"))
    short: list[str] = inputs["short"]
    long: list[str] = inputs["long"]
    started = time.perf_counter()
    encode, details = load(args.kind, args.path, args.file_name, args.threads, args.precision)
    load_seconds = time.perf_counter() - started

    # Warm-up, untimed: one whole pass over the short texts, one batch of the long ones.
    started = time.perf_counter()
    encode(short, args.batch_size)
    peak_short = common.peak_rss_mb()  # load + short texts only (the long batches set the overall peak)
    encode(long[: args.batch_size], args.batch_size)
    warmup_seconds = time.perf_counter() - started
    late = details.pop("_late", None)
    if late is not None:
        details.update(late())

    timings: dict[str, list[float]] = {"short": [], "long": []}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, texts in (("short", short), ("long", long)):
            started = time.perf_counter()
            out = encode(texts, args.batch_size)
            timings[name].append(time.perf_counter() - started)
            vectors[name] = np.asarray(out, dtype=np.float32)
    spearman = common.cosine_spearman_x100(vectors["short"][inputs["pairs1"]], vectors["short"][inputs["pairs2"]], np.asarray(inputs["gold"], dtype=np.float64))
    if args.vectors_out:
        tmp = Path(args.vectors_out + ".tmp.npz")
        np.savez(tmp, short=vectors["short"], long=vectors["long"])
        os.replace(tmp, args.vectors_out)
    result: dict[str, Any] = {
        "row": args.row or args.kind,
        "kind": args.kind,
        "path": args.path,
        "file_name": args.file_name,
        "precision": details.get("precision", "unknown"),
        "precision_asked": args.precision,
    }
    for name, texts in (("short", short), ("long", long)):
        best = min(timings[name])
        result[name] = {
            "texts": len(texts),
            "sentences_per_s": round(len(texts) / best, 2),
            "best_seconds": round(best, 4),
            "all_seconds": [round(t, 4) for t in timings[name]],
        }
    result.update(
        {
            "spearman": round(spearman, 4),
            "peak_rss_mb": round(common.peak_rss_mb(), 1),
            "peak_rss_mb_short_only": round(peak_short, 1),
            "load_seconds": round(load_seconds, 3),
            "warmup_seconds": round(warmup_seconds, 3),
            "dim": int(vectors["short"].shape[1]),
            "threads": args.threads,
            "batch_size": args.batch_size,
            "repeats": args.repeats,
            "env_threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM")},
            "details": details,
            "versions": common.versions(
                "anglekit", "sentence-transformers", "transformers", "torch", "onnxruntime", "optimum", "optimum-onnx", "openvino", "optimum-intel", "numpy"
            ),
            "python": sys.executable,
        }
    )
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="write the exported models the rows load")
    prep.add_argument("--what", choices=("anglekit", "st"), required=True)
    prep.add_argument("--out-dir", required=True)
    prep.add_argument("--exports", default="fp32,int8,int8-O2,int8-O3", help="anglekit: comma-separated of " + ",".join(ANGLEKIT_EXPORTS))
    prep.add_argument("--quant-config", default="avx512_vnni", help="st: arm64, avx2, avx512 or avx512_vnni")
    prep.add_argument("--openvino", action="store_true", help="st: also save backend='openvino'")
    prep.add_argument("--threads", type=int, default=2)
    prep.add_argument("--out", default=None)
    run = sub.add_parser("run", help="time one row")
    run.add_argument("--kind", choices=KINDS, required=True)
    run.add_argument("--row", default=None, help="the row's name in the table")
    run.add_argument("--path", required=True, help="model folder")
    run.add_argument("--file-name", default=None, help="st-onnx / st-openvino: model_kwargs file_name")
    run.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="torch rows: the weights' dtype; OpenVINO rows: the inference precision hint (default: the row's own)",
    )
    run.add_argument("--inputs", required=True, help="JSON written by bench_encode.py (short, long, pairs1, pairs2, gold)")
    run.add_argument("--threads", type=int, default=2)
    run.add_argument("--batch-size", type=int, default=64)
    run.add_argument("--repeats", type=int, default=3)
    run.add_argument("--vectors-out", default=None, help=".npz with the short and long vectors")
    run.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if getattr(args, "repeats", 1) < 1:
        parser.error("--repeats must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.redirect_stdout(sys.stderr):  # library chatter to stderr; the JSON line alone on stdout
        if args.command == "prepare":
            out_dir = Path(args.out_dir)
            if args.what == "anglekit":
                exports = [e for e in args.exports.split(",") if e]
                unknown = sorted(set(exports) - set(ANGLEKIT_EXPORTS))
                if unknown:
                    raise SystemExit(f"unknown exports {unknown}; expected {sorted(ANGLEKIT_EXPORTS)}")
                result = prepare_anglekit(out_dir, exports, args.threads)
            else:
                result = prepare_st(out_dir, args.quant_config, args.openvino, args.threads)
        else:
            result = run_row(args)
    common.write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
