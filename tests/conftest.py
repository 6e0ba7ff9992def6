"""Shared fixtures: tiny random models built in the session, tiny pair files. Strictly offline."""

from __future__ import annotations

import os

# Before anything imports huggingface_hub / transformers: never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models gain nothing from threads, and on a shared 2-core machine spinning OpenMP threads
# make every forward pass slow and erratic. Subprocesses inherit these.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import torch  # noqa: E402

import helpers  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs offline, even if a test or a library reset the environment."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # --precision auto trains in bf16 on CPUs with bf16 instructions: off here, so that no test's
    # outcome depends on the CPU; tests of that path simulate the CPU and ask for it.
    monkeypatch.setenv("ANGLEKIT_AUTO_BF16", "0")
    # A GGUF file's conversion is kept under the user's cache: tests keep to the GGUF path (and write
    # nothing there) unless they turn it on with a cache folder of their own (tests/llm/test_gguf_cache.py).
    monkeypatch.setenv("ANGLEKIT_GGUF_CACHE", "0")


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer BERT (hidden 32) + WordPiece tokenizer saved with save_pretrained. Read-only."""
    return helpers.build_tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "model")


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Llama causal LM; its tokenizer has no pad token and pads on the left. Read-only."""
    return helpers.build_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "model")


@pytest.fixture(scope="session")
def pair_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 training pairs, scores 0-5, JSON Lines (text1, text2, label)."""
    return helpers.write_pairs(tmp_path_factory.mktemp("pairs") / "train.jsonl", 64, seed=0)


@pytest.fixture(scope="session")
def dev_pair_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 dev pairs, scores 0-5, TSV."""
    return helpers.write_pairs(tmp_path_factory.mktemp("dev-pairs") / "dev.tsv", 24, seed=1)


@pytest.fixture
def copy_model(tmp_path: Path) -> Callable[[Path], Path]:
    """Copy a (read-only, session) model directory into this test's tmp dir, for tests that edit it."""
    import shutil

    def copy(source: Path, name: str = "model-copy") -> Path:
        target = tmp_path / name
        shutil.copytree(source, target)
        return target

    return copy


@pytest.fixture
def load_bert(tiny_bert_dir: Path) -> Callable[..., Any]:
    """``load_bert(**kwargs)`` -> a fresh Embedder of the tiny BERT on the CPU."""
    from anglekit.model.embedder import Embedder

    def load(**kwargs: Any) -> Any:
        kwargs.setdefault("device", "cpu")
        return Embedder.from_pretrained(tiny_bert_dir, **kwargs)

    return load
