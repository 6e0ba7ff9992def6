"""The sentence-transformers format: a folder that sentence-transformers 5.x and 6.x, TEI and
infinity load and that embeds exactly like the anglekit model.

The layout is :mod:`anglekit.model.st_layout`'s (``Embedder.save_pretrained`` writes the same one);
the export adds the custom module below for what stock modules cannot express, and checks the folder
with sentence-transformers. What is written (the long-standing layout every runtime reads, not the
5.4+ module paths):

- the backbone's weights and config, the tokenizer (right padding; ``model_max_length`` = max length);
- ``modules.json``: ``sentence_transformers.models.Transformer``, ``.Pooling`` and, when the model
  normalises, ``.Normalize``;
- ``1_Pooling/config.json`` with every old key (``pooling_mode_cls_token``, ...,
  ``include_prompt``): TEI parses only those, and current sentence-transformers converts them;
- ``sentence_bert_config.json`` with ``max_seq_length`` (TEI's max input length);
- ``config_sentence_transformers.json``: prompts (``query``, ``document``, and ``default`` named
  by ``default_prompt_name`` for the general prompt), ``similarity_fn_name`` cosine, and
  ``truncate_dim`` when the model has one (sentence-transformers 6 reads it, 5.x needs
  ``SentenceTransformer(..., truncate_dim=k)``, as the card says; it cuts
  *after* its Normalize module, so such vectors point the same way as anglekit's but are
  re-normalised only with ``normalize_embeddings=True``);
- ``anglekit_config.json`` (anglekit loads the folder as the same model) and a README.md card.

What sentence-transformers' own modules cannot express goes into ``anglekit_modules.py``, a small
custom module loaded with ``trust_remote_code=True``: the poolings ``cls_avg`` and
``first_last_avg`` (``AnglekitPooling`` in ``1_AnglekitPooling``) and prompt templates with text
inside or with the paper's preprocessing (``AnglekitTransformer``). Such folders have no
``1_Pooling/config.json``, so TEI refuses them instead of embedding differently. Bidirectional
decoders and role prompts that are not plain prefixes are refused.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, ExportError
from anglekit.model import st_layout
from anglekit.model.card import ModelCardData, card_of, describe, render
from anglekit.model.sentence_transformers import ANGLEKIT_MODULE_FILE
from anglekit.model.st_layout import DEFAULT_PROMPT_NAME, Layout, write_json

NAME = "sentence-transformers"
DESCRIPTION = "sentence-transformers folder (also read by TEI and infinity)"

logger = logging.getLogger(__name__)

TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
"""How far (max absolute difference of normalised vectors) the exported folder may embed from the
model, by the weights' dtype, before the export is refused."""


def plan(config: Any) -> Layout:
    """The modules an :class:`~anglekit.model.config.EmbedderConfig` needs (custom ones included),
    or an ExportError that names the setting sentence-transformers cannot reproduce."""
    try:
        return st_layout.plan(config)
    except ConfigError as exc:
        raise ExportError(str(exc)) from None


def custom_module_source(layout: Layout) -> str:
    """``anglekit_modules.py`` with TEMPLATE and PREPROCESS set for ``layout``."""
    source = (Path(__file__).with_name("custom_modules.py")).read_text(encoding="utf-8")
    for line, value in (("TEMPLATE = None\n", layout.template), ("PREPROCESS = False\n", layout.preprocess)):
        if line not in source:  # pragma: no cover - guards edits of custom_modules.py
            raise RuntimeError(f"custom_modules.py lost its line {line!r}")
        source = source.replace(line, f"{line.split(' =')[0]} = {value!r}\n", 1)
    return source


def write(model: Any, folder: Path, *, card: ModelCardData | None = None) -> Layout:
    """Write ``model`` (an Embedder without adapters) into the empty ``folder``; the layout used."""
    from anglekit.llm.lora import unwrap

    layout = plan(model.config)
    backbone = unwrap(model.backbone)
    backbone.save_pretrained(folder)
    tokenizer = model.tokenizer
    saved = (tokenizer.padding_side, tokenizer.model_max_length)
    try:
        # Right padding: exact for encoders and for causal decoders alike (a causal model's real
        # tokens never see padding that follows them), and what sentence-transformers' lasttoken expects.
        tokenizer.padding_side = "right"
        tokenizer.model_max_length = layout.max_length
        tokenizer.save_pretrained(folder)
    finally:
        tokenizer.padding_side, tokenizer.model_max_length = saved
    if layout.pooling == "first_last_avg":
        config_file = folder / "config.json"
        data = json.loads(config_file.read_text(encoding="utf-8"))
        data["output_hidden_states"] = True  # the first layer's states reach the pooling module
        write_json(config_file, data)

    dim = model.dim
    st_layout.write_modules(folder, layout, dim)
    if layout.custom:
        (folder / ANGLEKIT_MODULE_FILE).write_text(custom_module_source(layout), encoding="utf-8")
    model.config.save(folder)
    data = card_of(model, card)
    notes = _notes(layout)
    text = render(
        data, describe(model.config, dim), library_name="sentence-transformers", usage=_usage(layout), notes=notes, extra_tags=("sentence-transformers",)
    )
    (folder / "README.md").write_text(text, encoding="utf-8")
    return layout


def _usage(layout: Layout) -> str:
    trust = ", trust_remote_code=True" if layout.custom else ""
    return (
        "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
        f'model = SentenceTransformer("PATH_OR_REPO"{trust})\n'
        'vectors = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])\n```\n\n'
        'anglekit loads the same folder: `Embedder.from_pretrained("PATH_OR_REPO")`.'
    )


def _notes(layout: Layout) -> list[str]:
    notes = _format_notes(layout)
    if layout.truncate_dim is not None:
        notes.append(
            f"The model embeds into the first {layout.truncate_dim} coordinates (`truncate_dim` in "
            "config_sentence_transformers.json): sentence-transformers 6 reads it; with 5.x pass "
            f"`SentenceTransformer(..., truncate_dim={layout.truncate_dim})`. The cut follows the Normalize module: "
            "use `normalize_embeddings=True` for unit vectors."
        )
    return notes


def _format_notes(layout: Layout) -> list[str]:
    if layout.custom:
        what = f"pooling `{layout.pooling}`" if layout.st_mode is None else ""
        if layout.template is not None:
            what += (" and " if what else "") + f"the prompt template `{layout.template}`"
        return [
            f"`anglekit_modules.py` in this folder applies {what}: load the folder with `trust_remote_code=True` "
            "(sentence-transformers 3 and later; 6.x requires the flag).",
            "TEI cannot run custom modules and refuses this folder (no 1_Pooling/config.json); infinity runs it "
            "through sentence-transformers when remote code is trusted.",
        ]
    notes = [
        "Plain sentence-transformers modules: sentence-transformers 5.x and 6.x, TEI and infinity read this folder.",
        f"TEI rejects inputs longer than {layout.max_length} tokens unless started with `--auto-truncate` (sentence-transformers and anglekit truncate).",
    ]
    if layout.pooling == "last_max":
        notes.append("TEI has no max pooling and refuses this folder.")
    if layout.default_prompt_name is not None:
        notes.append(
            f"The model embeds every text with the prompt `{layout.prompts[DEFAULT_PROMPT_NAME]}`: sentence-transformers "
            "applies it by default (default_prompt_name); start TEI with `--default-prompt-name default`."
        )
    return notes


def probe_texts(max_length: int) -> list[str]:
    """Texts the export is checked on: short, punctuated, quoted, and one longer than the max length."""
    long_text = " ".join(["the quick brown fox jumps over the lazy dog"] * (max_length // 4 + 8))
    return [
        "A man is playing a guitar.",
        'He said "no" to the offer?',
        "wow!",
        "Two dogs run across the snowy field while their owner watches",
        long_text,
    ]


def verify(model: Any, folder: Path, layout: Layout) -> tuple[float | None, str]:
    """(max absolute difference of normalised vectors between ``model`` and sentence-transformers
    loading ``folder``, how it was checked); None and the reason when sentence-transformers is missing."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None, "not checked: sentence-transformers is not installed"
    import numpy as np

    texts = probe_texts(layout.max_length)
    ours = np.asarray(model.encode(texts, batch_size=2, normalize=True), dtype=np.float64)
    loaded = SentenceTransformer(str(folder), device="cpu", trust_remote_code=layout.custom)
    try:
        theirs = np.asarray(loaded.encode(texts, batch_size=2, convert_to_numpy=True), dtype=np.float64)
    finally:
        del loaded
    norms = np.linalg.norm(theirs, axis=1, keepdims=True)
    theirs = theirs / np.where(norms > 0, norms, 1.0)
    if theirs.shape != ours.shape:
        return math.inf, f"sentence-transformers gives vectors of shape {theirs.shape}, anglekit {ours.shape}"
    import sentence_transformers

    return float(np.abs(theirs - ours).max()), f"checked with sentence-transformers {sentence_transformers.__version__}"


def tolerance(model: Any) -> float:
    """The largest difference :func:`verify` accepts for ``model``'s weights' dtype."""
    dtype = str(next(model.backbone.parameters()).dtype).removeprefix("torch.")
    return TOLERANCE.get(dtype, 1e-4)


__all__ = ["DESCRIPTION", "NAME", "Layout", "custom_module_source", "plan", "probe_texts", "tolerance", "verify", "write"]
