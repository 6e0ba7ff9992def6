"""The mteb wrapper: accepted by mteb's protocol check and scored by mteb's own STS evaluator, offline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

pytest.importorskip("mteb")

import mteb  # noqa: E402
from mteb.models.models_protocols import EncoderProtocol  # noqa: E402

from anglekit.evaluation.mteb_model import AnglekitMTEBModel, local_sts_task  # noqa: E402
from anglekit.metrics.similarity import correlation_scores, paired_cosine  # noqa: E402


class RandomProjection:
    """Bag of words through a fixed random matrix: continuous scores, no ties."""

    def __init__(self, dim: int = 24) -> None:
        self.dim = dim

    def vector(self, word: str) -> np.ndarray:
        seed = sum((i + 1) * ord(c) for i, c in enumerate(word))
        return np.random.default_rng(seed).normal(size=self.dim)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([sum((self.vector(w) for w in t.split()), np.full(self.dim, 0.01)) for t in texts])


def _pairs(n: int = 40) -> tuple[list[str], list[str], np.ndarray]:
    rng = np.random.default_rng(0)
    words = ["a", "man", "woman", "dog", "cat", "plays", "runs", "in", "the", "park", "red", "car", "guitar"]
    t1 = [" ".join(rng.choice(words, 5)) for _ in range(n)]
    t2 = [" ".join(rng.choice(words, 5)) for _ in range(n)]
    return t1, t2, rng.uniform(0, 5, n)


def test_wrapper_satisfies_mteb_encoder_protocol() -> None:
    model = AnglekitMTEBModel(RandomProjection(), name="test/random-projection")
    assert isinstance(model, EncoderProtocol)
    assert model.mteb_model_meta.name == "test/random-projection"
    assert str(model.mteb_model_meta.similarity_fn_name) == "cosine"


def test_mteb_scores_a_local_sts_task_like_anglekit() -> None:
    encode = RandomProjection()
    t1, t2, gold = _pairs()
    model = AnglekitMTEBModel(encode, name="test/random-projection", revision="r1")
    results = mteb.evaluate(model, local_sts_task("AnglekitLocalSTS", t1, t2, gold), cache=None, show_progress_bar=False)
    scores = results.task_results[0].scores["test"][0]
    ours = correlation_scores(paired_cosine(encode(t1), encode(t2)), gold)
    assert scores["cosine_spearman"] * 100 == pytest.approx(ours.spearman, abs=1e-3)
    assert scores["spearman"] * 100 == pytest.approx(ours.spearman, abs=1e-3)
    assert scores["cosine_pearson"] * 100 == pytest.approx(ours.pearson, abs=1e-3)
    assert {c["task"] for c in model.calls} == {"AnglekitLocalSTS"}
    assert sum(c["n"] for c in model.calls) == 2 * len(t1)


def test_prompts_are_applied_by_task_then_type() -> None:
    seen: list[str] = []

    def encode(texts: Sequence[str]) -> np.ndarray:
        seen.extend(texts)
        return np.random.default_rng(len(seen)).normal(size=(len(texts), 3))

    t1, t2, gold = _pairs(4)
    model = AnglekitMTEBModel(encode, prompts={"STS": "sts: {text}", "AnglekitPrompted": "task: {text}"})
    mteb.evaluate(model, local_sts_task("AnglekitPrompted", t1, t2, gold), cache=None, show_progress_bar=False)
    assert seen and all(s.startswith("task: ") for s in seen)
    with pytest.raises(ValueError, match="must contain"):
        AnglekitMTEBModel(encode, prompts={"STS": "no placeholder"})


class FakeEmbedder:
    """Looks like an anglekit Embedder (encode with role, fingerprint, config.max_length)."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        # a model with query and document prompts: role_if_present names them, as EmbedderConfig's does
        self.config = SimpleNamespace(max_length=16, pooling="last_avg", prompt=None, normalize=False, role_if_present=lambda role: role)
        self.roles: list[str | None] = []

    def fingerprint(self) -> str:
        return "fake"

    def encode(self, texts: Sequence[str], batch_size: int = 32, *, convert_to: str = "numpy", role: str | None = None) -> np.ndarray:
        self.roles.append(role)
        return np.random.default_rng(len(texts)).normal(size=(len(texts), 4))


def test_query_and_document_roles_reach_an_embedder() -> None:
    from mteb.types import PromptType

    fake = FakeEmbedder()
    model = AnglekitMTEBModel(fake)
    assert model.mteb_model_meta.revision == "fake"
    task = local_sts_task("AnglekitRoles", *_pairs(3))

    def loader(texts: list[str]) -> list[dict[str, list[str]]]:
        return [{"text": texts}]

    model.encode(loader(["q1", "q2"]), task_metadata=task.metadata, hf_split="test", hf_subset="default", prompt_type=PromptType.query)
    model.encode(loader(["d1"]), task_metadata=task.metadata, hf_split="test", hf_subset="default", prompt_type=PromptType.document)
    model.encode(loader(["s1"]), task_metadata=task.metadata, hf_split="test", hf_subset="default")
    assert fake.roles == ["query", "document", None]
