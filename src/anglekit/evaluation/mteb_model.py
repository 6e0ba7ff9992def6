"""Run MTEB on any anglekit encoder: a wrapper that ``mteb`` accepts as a model.

Needs the optional ``mteb`` package (``pip install mteb``; tested with mteb 2.x). Nothing else in
anglekit imports this module.

    import mteb
    from anglekit.model.embedder import Embedder
    from anglekit.evaluation.mteb_model import AnglekitMTEBModel

    embedder = Embedder.from_pretrained("path/to/model", max_length=512)
    model = AnglekitMTEBModel(embedder, name="me/my-angle-model")
    results = mteb.evaluate(model, mteb.get_tasks(tasks=["STS12"]), cache=None)

The wrapper implements mteb's ``EncoderProtocol``: ``encode(inputs, *, task_metadata, hf_split,
hf_subset, prompt_type=None, **kwargs)`` where ``inputs`` is a DataLoader of batches with a
``"text"`` column; similarity is cosine (``ScoringFunction.COSINE``). Prompts: ``prompts`` maps a
task name, task type or prompt type (``"query"`` / ``"document"``) to a template with ``{text}``
(most specific first, as mteb resolves them); without one, an anglekit Embedder encodes queries and
documents with its own ``query_prompt`` / ``document_prompt`` (``encode(role=...)``) and everything
else with its saved ``prompt``; other models get the texts as they are.

:func:`local_sts_task` builds an mteb STS task from local pairs (no download), e.g. to check a
model with mteb's own evaluator offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    import mteb  # noqa: F401
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction
except ImportError as exc:  # pragma: no cover - exercised only without mteb
    raise ImportError("anglekit.evaluation.mteb_model needs the 'mteb' package: pip install mteb") from exc

from anglekit.evaluation.encoders import PreparedEncoder, prepare_encoder
from anglekit.model import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from torch.utils.data import DataLoader


def _prompt_type_name(prompt_type: Any) -> str | None:
    if prompt_type is None:
        return None
    return str(getattr(prompt_type, "value", prompt_type))


class AnglekitMTEBModel(AbsEncoder):
    """An anglekit encoder (Embedder, SentenceTransformer or ``texts -> array`` callable) for mteb."""

    def __init__(
        self,
        model: Any,
        *,
        name: str = "anglekit/model",
        revision: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_length: int | None = None,
        prompts: dict[str, str] | None = None,
        progress: bool = False,
        embed_dim: int | None = None,
    ) -> None:
        self.encoder: PreparedEncoder = prepare_encoder(model, batch_size=batch_size, max_length=max_length, name=name, progress=progress)
        self.model = model
        for key, template in (prompts or {}).items():
            if "{text}" not in template:
                raise ValueError(f"prompt for {key!r} must contain '{{text}}', got {template!r}")
        self.prompts = dict(prompts or {})
        revision = revision or self.encoder.fingerprint or "unknown"
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={
                "name": name if "/" in name else f"anglekit/{name}",
                "revision": revision,
                "max_tokens": self.encoder.max_length,
                "embed_dim": embed_dim,
                "similarity_fn_name": ScoringFunction.COSINE,
                "framework": ["PyTorch"],
                "open_weights": True,
            }
        )
        self.calls: list[dict[str, Any]] = []

    def _template(self, task_metadata: Any, prompt_type: Any) -> str | None:
        kind = _prompt_type_name(prompt_type)
        task_name = getattr(task_metadata, "name", None)
        task_type = getattr(task_metadata, "type", None)
        candidates = []
        if task_name and kind:
            candidates.append(f"{task_name}-{kind}")
        candidates.append(task_name)
        if task_type and kind:
            candidates.append(f"{task_type}-{kind}")
        candidates += [task_type, kind]
        for key in candidates:
            if key and key in self.prompts:
                return self.prompts[key]
        return None

    def encode(self, inputs: DataLoader, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str, prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        texts: list[str] = []
        for batch in inputs:
            if "text" not in batch:
                raise ValueError(f"expected text batches with a 'text' column, got columns {sorted(batch)}")
            texts.extend(batch["text"])
        template = self._template(task_metadata, prompt_type)
        kind = _prompt_type_name(prompt_type)
        encoder = self.encoder
        if template is not None:
            texts = [template.replace("{text}", t) for t in texts]
        elif kind in ("query", "document"):
            # the model's query/document prompt when it has one (else its general prompt, as encode_query does)
            encoder = self.encoder.for_role(kind)
        self.calls.append(
            {
                "task": getattr(task_metadata, "name", None),
                "split": hf_split,
                "subset": hf_subset,
                "prompt_type": kind,
                "n": len(texts),
            }
        )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.asarray(encoder(texts, desc=f"mteb {getattr(task_metadata, 'name', '')}"), dtype=np.float32)


def local_sts_task(
    name: str, text1: Sequence[str], text2: Sequence[str], scores: Sequence[float], *, min_score: float = 0.0, max_score: float = 5.0, split: str = "test"
) -> AbsTaskSTS:
    """An mteb STS task over local pairs (one split, English), evaluated by mteb's own STS evaluator."""
    from datasets import Dataset, DatasetDict

    if not (len(text1) == len(text2) == len(scores)):
        raise ValueError(f"text1, text2 and scores differ in length: {len(text1)}, {len(text2)}, {len(scores)}")
    metadata = TaskMetadata(
        name=name,
        type="STS",
        main_score="cosine_spearman",
        description=f"Local STS pairs ({name}) evaluated offline through anglekit.",
        reference="https://github.com/embeddings-benchmark/mteb",
        dataset={"path": "NA", "revision": "NA"},
        category="t2t",
        eval_splits=[split],
        eval_langs=["eng-Latn"],
        date=("2000-01-01", "2000-01-01"),
        dialect=["Written"],
        domains=[],
        task_subtypes=[],
        license="not specified",
        annotations_creators="human-annotated",
        modalities=["text"],
        sample_creation="found",
        bibtex_citation="",
    )
    data = {"sentence1": list(text1), "sentence2": list(text2), "score": [float(s) for s in scores]}

    class _LocalSTS(AbsTaskSTS):
        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = DatasetDict({split: Dataset.from_dict(data)})
            self.data_loaded = True

    _LocalSTS.metadata = metadata
    _LocalSTS.min_score = min_score  # type: ignore[assignment]
    _LocalSTS.max_score = max_score  # type: ignore[assignment]
    _LocalSTS.__name__ = f"LocalSTS_{name}"
    return _LocalSTS()
