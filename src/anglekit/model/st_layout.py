"""The sentence-transformers layout of a saved model folder (issue 28).

Every folder ``Embedder.save_pretrained`` (and so ``train``) writes, and ``anglekit export
--format sentence-transformers``, carries the long-standing layout that sentence-transformers 5.x
and 6.x, TEI and infinity read:

- ``modules.json``: ``sentence_transformers.models.Transformer``, ``.Pooling`` and, when the model
  normalises, ``.Normalize``;
- ``1_Pooling/config.json`` with every old key (``pooling_mode_cls_token``, ..., ``include_prompt``);
- ``sentence_bert_config.json`` with ``max_seq_length``;
- ``config_sentence_transformers.json``: prompts (every named prompt, such as ``query`` and
  ``document``, and ``default`` named by ``default_prompt_name`` for the general prompt),
  ``similarity_fn_name`` cosine, ``truncate_dim``;
- ``anglekit_config.json`` beside them holds what sentence-transformers cannot express.

A setting stock sentence-transformers modules cannot reproduce (see :func:`unexpressible`) gets
:data:`REFUSAL_MODULE` in ``modules.json`` instead: a module that does not exist, so that
sentence-transformers refuses to load the folder rather than fall back to mean pooling.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.model.sentence_transformers import (
    ANGLEKIT_POOLING,
    ANGLEKIT_TRANSFORMER,
    DEFAULT_PROMPT_NAME,
    LEGACY_POOLING_KEYS,
    MODULES_FILE,
    REFUSAL_MODULE,
    ST_CONFIG_FILE,
    ST_TO_ANGLEKIT_POOLING,
)

ST_MODE = {pooling: mode for mode, pooling in ST_TO_ANGLEKIT_POOLING.items()}
"""anglekit pooling -> sentence-transformers Pooling mode, where one matches exactly."""
REFUSAL_README = "README_sentence_transformers.md"
"""Written beside :data:`REFUSAL_MODULE`: why sentence-transformers cannot load the folder."""
ST_FILES = (MODULES_FILE, "1_Pooling", "1_AnglekitPooling", "2_Normalize", "sentence_bert_config.json", ST_CONFIG_FILE, REFUSAL_README)
"""What the layout adds to a folder (files and subfolders)."""


@dataclass(frozen=True)
class Layout:
    """How a model maps onto sentence-transformers modules (see :func:`plan`)."""

    pooling: str
    st_mode: str | None
    """sentence-transformers' Pooling mode, or None for ``AnglekitPooling``."""
    template: str | None
    """A template for ``AnglekitTransformer`` (text inside, or preprocessed), or None."""
    preprocess: bool
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    normalize: bool = False
    max_length: int = 512
    truncate_dim: int | None = None

    @property
    def custom(self) -> bool:
        """Whether the folder needs ``anglekit_modules.py`` (loaded with trust_remote_code=True)."""
        return self.st_mode is None or self.template is not None


def _prefix(template: str | None) -> str | None:
    """The prefix of a template that only prefixes the text (``"query: {text}"`` -> ``"query: "``)."""
    if template is None:
        return ""
    if template.endswith("{text}") and template.count("{text}") == 1:
        return template[: -len("{text}")]
    return None


def plan(config: Any) -> Layout:
    """The modules an :class:`~anglekit.model.config.EmbedderConfig` needs (stock or anglekit's custom
    ones), or a ConfigError naming the setting no sentence-transformers module can reproduce."""
    if getattr(config, "layer", None) is not None:
        raise ConfigError(
            f"layer {config.layer} (embedding from an earlier transformer layer, ESE) cannot be expressed in the "
            "sentence-transformers format; sentence-transformers would embed from the last layer"
        )
    if config.bidirectional:
        raise ConfigError(
            "bidirectional attention (a decoder without its causal mask) cannot be expressed in the "
            "sentence-transformers format; sentence-transformers would run the decoder causally"
        )
    named = config.named_prompts
    templates = {"prompt": config.prompt, **{f"prompts.{name}": t for name, t in named.items()}}
    prefixes = {name: _prefix(t) for name, t in templates.items()}
    template, preprocess = None, bool(config.prompt_preprocess) and any(t is not None for t in templates.values())
    prompts: dict[str, str] = {}
    default_name = None
    if not preprocess and all(p is not None for p in prefixes.values()):
        general = prefixes["prompt"] or ""
        # sentence-transformers gives every model query and document prompts ("" unless saved), which
        # its encode_query / encode_document apply instead of the default: a model without those
        # roles gets its general prompt there, as anglekit's encode_query / encode_document use it.
        prompts = {"query": general, "document": general, **{name: prefixes[f"prompts.{name}"] or "" for name in named}}
        if config.prompt is not None:
            if prompts.get(DEFAULT_PROMPT_NAME, general) != general:
                raise ConfigError(
                    f"the named prompt {DEFAULT_PROMPT_NAME!r} ({named[DEFAULT_PROMPT_NAME]!r}) differs from the general prompt "
                    f"{config.prompt!r}, which the sentence-transformers layout saves under that name"
                )
            prompts[DEFAULT_PROMPT_NAME] = general
            default_name = DEFAULT_PROMPT_NAME
    elif config.prompt is not None and all(t == config.prompt for t in named.values()):
        template = config.prompt
        prompts = {"query": "", "document": "", **{name: "" for name in named}}
    else:
        given = {name: t for name, t in templates.items() if t is not None}
        raise ConfigError(
            f"prompts {given} (preprocessing {'on' if preprocess else 'off'}) cannot be expressed in the "
            "sentence-transformers format: its prompts are plain prefixes, and anglekit's custom module carries one "
            "general template (no separate template per named prompt)"
        )
    return Layout(
        pooling=config.pooling,
        st_mode=ST_MODE.get(config.pooling) if template is None else None,
        template=template,
        preprocess=preprocess,
        prompts=prompts,
        default_prompt_name=default_name,
        normalize=bool(config.normalize),
        max_length=int(config.max_length),
        truncate_dim=getattr(config, "truncate_dim", None),
    )


def unexpressible(config: Any) -> str | None:
    """Why stock sentence-transformers modules (no remote code) cannot embed exactly like ``config``,
    or None when they can."""
    if getattr(config, "long_text", "truncate") != "truncate":
        return f"long_text {config.long_text} (long texts embedded as chunks) has no sentence-transformers module; it would truncate"
    try:
        layout = plan(config)
    except ConfigError as exc:
        return str(exc)
    if layout.st_mode is None and layout.template is None:
        return f"pooling {layout.pooling} has no sentence-transformers Pooling mode; it would pool differently"
    if layout.template is not None:
        return f"the prompt template {layout.template!r} (preprocessing {'on' if layout.preprocess else 'off'}) is not a plain prefix"
    if layout.truncate_dim is not None and layout.normalize:
        return (
            f"truncate_dim {layout.truncate_dim} with normalisation: sentence-transformers cuts after its Normalize "
            "module, so its vectors would not be unit length"
        )
    return None


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented JSON at ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _versions() -> dict[str, str]:
    import torch
    import transformers

    # No sentence_transformers version: the layout is the long-standing one, and older versions
    # would warn that the folder comes from a newer one.
    return {"transformers": transformers.__version__, "pytorch": torch.__version__}


def write_modules(folder: Path, layout: Layout, dim: int) -> None:
    """The sentence-transformers files of ``layout`` (not the weights, tokenizer or card) into ``folder``."""
    transformer_type = ANGLEKIT_TRANSFORMER if layout.template is not None else "sentence_transformers.models.Transformer"
    modules = [{"idx": 0, "name": "0", "path": "", "type": transformer_type}]
    if layout.st_mode is not None:
        modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})
        pooling: dict[str, Any] = {"word_embedding_dimension": dim}
        pooling.update({key: mode == layout.st_mode for key, mode in LEGACY_POOLING_KEYS.items()})
        pooling["include_prompt"] = True
        write_json(folder / "1_Pooling" / "config.json", pooling)
    else:
        modules.append({"idx": 1, "name": "1", "path": "1_AnglekitPooling", "type": ANGLEKIT_POOLING})
        write_json(folder / "1_AnglekitPooling" / "config.json", {"pooling": layout.pooling, "dimension": dim})
    if layout.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        write_json(folder / "2_Normalize" / "config.json", {})
    write_json(folder / MODULES_FILE, modules)
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": layout.max_length, "do_lower_case": False})
    write_json(
        folder / ST_CONFIG_FILE,
        {
            "__version__": _versions(),
            "model_type": "SentenceTransformer",
            "prompts": layout.prompts,
            "default_prompt_name": layout.default_prompt_name,
            "similarity_fn_name": "cosine",
            **({"truncate_dim": layout.truncate_dim} if layout.truncate_dim is not None else {}),
        },
    )


def write_refusal(folder: Path, reason: str) -> None:
    """A ``modules.json`` naming :data:`REFUSAL_MODULE` (which does not exist: sentence-transformers
    refuses the folder) and a README saying why."""
    write_json(folder / MODULES_FILE, [{"idx": 0, "name": "0", "path": "", "type": REFUSAL_MODULE}])
    (folder / REFUSAL_README).write_text(
        "# Not loadable by sentence-transformers\n\n"
        f"This model uses a setting sentence-transformers cannot reproduce: {reason}.\n\n"
        f"`modules.json` names `{REFUSAL_MODULE}`, a module that does not exist, so that "
        "sentence-transformers refuses the folder instead of embedding it differently (e.g. with mean pooling). "
        "Load it with anglekit (`Embedder.from_pretrained(path)`), or `anglekit export` it to a format that "
        "carries the setting.\n",
        encoding="utf-8",
    )


def write_layout(folder: Path, config: Any, dim: int) -> str | None:
    """The stock sentence-transformers layout of ``config`` into ``folder``, or the refusal
    (returns its reason) when stock modules cannot express it."""
    reason = unexpressible(config)
    if reason is not None:
        write_refusal(folder, reason)
        return reason
    write_modules(folder, plan(config), dim)
    return None


__all__ = [
    "DEFAULT_PROMPT_NAME",
    "REFUSAL_README",
    "ST_FILES",
    "ST_MODE",
    "Layout",
    "plan",
    "unexpressible",
    "write_json",
    "write_layout",
    "write_modules",
    "write_refusal",
]
