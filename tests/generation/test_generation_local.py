"""The in-process Hugging Face backend on a tiny random Llama (fast): batching of concurrent requests,
token usage, and its place in the pipeline (spec ``hf:PATH``). The real SmolLM2 run is in
test_generation_smollm2.py (slow)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from anglekit.generation import GenerationConfig, generate_pairs
from anglekit.generation.backends import GenerationParams
from anglekit.generation.backends.local_hf import LocalHFBackend

GREEDY = GenerationParams(temperature=0.0, max_tokens=6, seed=0)


def test_batched_requests_are_answered_each_with_usage(tiny_llama_dir: Path) -> None:
    backend = LocalHFBackend(str(tiny_llama_dir), device="cpu", batch_size=3)
    prompts = ["a man plays a guitar", "the cat", "a woman is slicing an onion today"]
    calls: list[int] = []
    original = backend.generate

    def counting(batch: list[str], params: GenerationParams) -> list:
        calls.append(len(batch))
        return original(batch, params)

    backend.generate = counting  # type: ignore[method-assign]
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda p: backend.complete(p, GREEDY), prompts))
    assert sum(calls) == 3 and max(calls) >= 2  # batched
    assert all(0 < a.usage["completion_tokens"] <= 6 and a.usage["prompt_tokens"] > 0 for a in answers)
    assert answers[1].usage["prompt_tokens"] < answers[2].usage["prompt_tokens"]  # padding not counted
    single = LocalHFBackend(str(tiny_llama_dir), device="cpu")
    assert single.complete(prompts[0], GREEDY).usage["prompt_tokens"] == answers[0].usage["prompt_tokens"]


def test_a_batch_answered_short_fails_every_caller_instead_of_leaving_one_waiting(tiny_llama_dir: Path) -> None:
    backend = LocalHFBackend(str(tiny_llama_dir), device="cpu", batch_size=3)
    original = backend.generate
    backend.generate = lambda batch, params: original(batch, params)[:-1]  # type: ignore[method-assign]
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(backend.complete, p, GREEDY) for p in ("a man plays a guitar", "the cat", "rain")]
        errors = [f.exception(timeout=120) for f in futures]
    assert all(isinstance(e, RuntimeError) and "answers for" in str(e) for e in errors), errors


def test_hf_spec_runs_in_the_pipeline(tiny_llama_dir: Path, tmp_path: Path) -> None:
    config = GenerationConfig(
        llms=[f"hf:{tiny_llama_dir}"],
        max_tokens=6,
        temperature=0.0,
        progress=False,
        device="cpu",
        batch_size=2,
        min_chars=1,
        cache_dir=str(tmp_path / "cache"),
    )
    result = generate_pairs(["a man plays a guitar", "the cat sat"], tmp_path / "p.jsonl", config)
    summary = result.summary
    assert summary["complete"] and summary["requests"]["sent"] == 4 and summary["usage"]["completion_tokens"] > 0
    assert summary["llms"] == [f"hf:{tiny_llama_dir}"]
    assert sum(summary["answer_formats"].values()) == 4
