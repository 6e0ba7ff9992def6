"""Queries from documents: documents x LLMs x styles -> cached answers -> cleaned queries -> an
optional consistency filter -> (anchor, positive) rows that ``anglekit mine`` and ``anglekit train`` read.

The requests run on the machinery of :mod:`anglekit.generation.pipeline` (backends, cache and resume,
concurrency, retries, Ctrl-C, usage and cost). Each output line, in document, LLM, style and answer
order::

    {"anchor": query, "positive": document text, "doc_id": ..., "style": "question"|"keyword",
     "llm": ..., "prompt_id": ..., "template_sha256": ..., "answer_sha256": ...[, "filter_rank": r]}

Documents with equal texts are asked once; their queries name the first one's id. The summary
(``<out>.summary.json``) counts what each filter dropped. When the filters keep nothing, no file is
written and :class:`~anglekit.errors.NothingGeneratedError` names the filter and its counts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anglekit.config import check_fields, setting
from anglekit.errors import ConfigError, NothingGeneratedError
from anglekit.generation.backends import Backend
from anglekit.generation.cleaning import normalize
from anglekit.generation.consistency import consistency_filter, load_filter_model
from anglekit.generation.documents import Documents
from anglekit.generation.parsing import parse_answer
from anglekit.generation.pipeline import (
    GenerationConfig,
    GenerationResult,
    RequestRun,
    Task,
    request_summary,
    run_requests,
    start_requests,
    summary_path,
    usage_and_cost,
)
from anglekit.generation.query_filters import QueryLimits, clean_queries, drop_shared_queries, filter_counts
from anglekit.generation.query_prompts import QUERY_STYLES, QueryTemplate, resolve_query_prompts
from anglekit.io.atomic import atomic_write, atomic_write_json
from anglekit.model.load_settings import device_name


@dataclass
class QueryConfig:
    """What ``anglekit generate --kind queries`` adds to :class:`~anglekit.generation.GenerationConfig`
    (which holds the LLMs, ``--size`` (queries asked per document and style, at most this many
    kept), sampling, the character limits and the near-duplicate ratio, cache and operation)."""

    styles: tuple[str, ...] = setting(("question",), choices=QUERY_STYLES, help="the query styles to ask for")
    templates: dict[str, str] = setting(default_factory=dict, help="templates per style, with {document} (and {size}) (default: anglekit's)")
    min_words: int = setting(2, minimum=1, help="drop queries of fewer words (split on whitespace)")
    max_words: int = setting(40, minimum=1, help="drop queries of more words")
    filter_model: str | None = setting(
        None, metavar="MODEL", help="consistency filter: keep a query only if this embedding model ranks its document within --filter-top-k"
    )
    filter_top_k: int | None = setting(None, minimum=1, metavar="K", help="consistency filter: the rank a query's document must reach (default 1)")
    filter_batch_size: int | None = setting(None, minimum=1, metavar="N", help="consistency filter: texts per encode batch (default 64)")
    filter_device: str | None = setting(None, parse=device_name, metavar="DEVICE", help="consistency filter: cpu, cuda, cuda:N or mps (default: the model's)")

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.styles:
            raise ConfigError("styles must name at least one query style")
        if self.min_words > self.max_words:
            raise ConfigError(f"--min-words ({self.min_words}) must not exceed --max-words ({self.max_words})")
        if self.filter_model is None:
            given = [f"--{name.replace('_', '-')}" for name in ("filter_top_k", "filter_batch_size", "filter_device") if getattr(self, name) is not None]
            if given:
                raise ConfigError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to the consistency filter, and no --filter-model is given")
        elif not isinstance(self.filter_model, str) or not self.filter_model.strip():
            raise ConfigError(f"--filter-model {self.filter_model!r}: expected a model name or folder")
        resolve_query_prompts(tuple(self.styles), self.templates)  # a bad template is found before any model loads

    @property
    def top_k(self) -> int:
        return self.filter_top_k if self.filter_top_k is not None else 1


@dataclass
class _Kept:
    """The queries kept so far, with what the summary counts."""

    records: list[dict[str, Any]] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    candidates: int = 0


def _check_pair_settings(config: GenerationConfig) -> None:
    """The pairs' own settings would be ignored by a query run: an error instead."""
    defaults = GenerationConfig()
    given = [
        flag
        for name, flag in (
            ("kinds", "kinds (--kind synonym/antonym)"),
            ("templates", "--synonym-template/--antonym-template"),
            ("positive_label", "--positive-label"),
            ("negative_label", "--negative-label"),
        )
        if getattr(config, name) != getattr(defaults, name)
    ]
    if given:
        raise ConfigError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to synonym/antonym pairs, not to --kind queries")


def generate_queries(
    documents: Documents,
    out: str | Path,
    config: GenerationConfig,
    queries: QueryConfig | None = None,
    *,
    backends: Sequence[Backend] | None = None,
) -> GenerationResult:
    """Write queries for ``documents`` with ``config.llms`` (or ``backends``) into ``out``.

    Failed requests, Ctrl-C and fatal errors behave as in :func:`~anglekit.generation.generate_pairs`
    (a Ctrl-C with a consistency filter writes no rows: they would be unfiltered). Filters that keep
    nothing raise :class:`~anglekit.errors.NothingGeneratedError` after the summary is written."""
    queries = queries or QueryConfig()
    _check_pair_settings(config)
    if len(documents) == 0:
        raise ConfigError(f"{documents.source}: no documents to write queries for")
    out = Path(out)
    prompts = resolve_query_prompts(tuple(queries.styles), queries.templates)
    embedder = load_filter_model(queries.filter_model, queries.filter_device) if queries.filter_model is not None else None
    requests = start_requests(config, out, backends)
    unique = list(dict.fromkeys(documents.texts))
    tasks = [Task(i, text, b, style) for i, text in enumerate(unique) for b in range(len(requests.backends)) for style in queries.styles]
    try:
        run_requests(requests, tasks, prompts, config, desc="queries")
    finally:
        summary, failure = _finish(out, documents, unique, config, queries, requests, prompts, tasks, embedder)
    if requests.progress.fatal is not None:
        raise requests.progress.fatal
    if failure is not None:
        raise NothingGeneratedError(f"{out}: {failure}; no queries file is written (the summary is in {summary_path(out)})")
    return GenerationResult(out, summary, summary.pop("_records"))


def _collect(config: GenerationConfig, queries: QueryConfig, requests: RequestRun, prompts: dict[str, QueryTemplate], tasks: list[Task],
             unique: list[str], first_id: dict[str, str]) -> _Kept:  # fmt: skip
    """The cleaned queries of every answer at hand, in task order, at most ``size`` per answer, none
    shared by two documents."""
    limits = QueryLimits(queries.min_words, queries.max_words, config.min_chars, config.max_chars, config.near_duplicate_ratio)
    answers = requests.progress.answers
    kept = _Kept()
    seen: dict[int, list[str]] = {}
    documents_of: dict[str, set[int]] = {}
    for task in tasks:
        entry = answers.get(task)
        if entry is None:
            continue
        parsed = parse_answer(entry["answer"])
        kept.formats[parsed.format] += 1
        kept.candidates += len(parsed.items)
        if not parsed.items:
            kept.drops["answer without a query"] += 1
            continue
        texts, dropped = clean_queries(parsed.items, task.text, limits, seen.setdefault(task.index, []))
        kept.drops.update(dropped)
        if len(texts) > config.size:
            kept.drops["beyond size"] += len(texts) - config.size
            del seen[task.index][len(seen[task.index]) - (len(texts) - config.size) :]
            texts = texts[: config.size]
        template = prompts[task.kind]
        digest = hashlib.sha256(entry["answer"].encode("utf-8")).hexdigest()
        for text in texts:
            documents_of.setdefault(normalize(text), set()).add(task.index)
            kept.records.append(
                {"anchor": text, "positive": unique[task.index], "doc_id": first_id[unique[task.index]], "style": task.kind,
                 "llm": requests.backends[task.llm].llm_id, "prompt_id": template.prompt_id, "template_sha256": template.sha256,
                 "answer_sha256": digest, "_document": task.index}
            )  # fmt: skip
    shared = drop_shared_queries(documents_of)
    if shared:
        before = len(kept.records)
        kept.records = [r for r in kept.records if normalize(r["anchor"]) not in shared]
        kept.drops["duplicate across documents"] += before - len(kept.records)
    return kept


def _consistency(kept: _Kept, queries: QueryConfig, unique: list[str], embedder: Any) -> dict[str, Any] | None:
    """Run the consistency filter over the kept queries (each gets its ``filter_rank``); its summary."""
    if embedder is None or queries.filter_model is None or not kept.records:
        return None
    result = consistency_filter(
        embedder, queries.filter_model, queries.top_k, [r["anchor"] for r in kept.records], [r["_document"] for r in kept.records], unique,
        batch_size=queries.filter_batch_size or 64,
    )  # fmt: skip
    for record, rank in zip(kept.records, result.ranks, strict=True):
        record["filter_rank"] = int(rank)
    kept.drops["consistency"] += int((~result.keep).sum())
    kept.records = [r for r, keep in zip(kept.records, result.keep, strict=True) if keep]
    return result.summary()


def _nothing_kept(kept: _Kept, answers: dict[Task, dict[str, Any]], consistency: dict[str, Any] | None, queries: QueryConfig) -> str | None:
    """Why no row is left (the filter and its counts), or None when some are."""
    if kept.records or not answers:
        return None
    if all(not str(entry.get("answer", "")).strip() for entry in answers.values()):
        return f"every one of the {len(answers)} answers is empty (raise --max-tokens, or try another model or prompt)"
    counts = ", ".join(f"{reason} {n}" for reason, n in sorted(kept.drops.items()) if reason != "consistency")
    if consistency is not None and consistency["checked"]:
        return (
            f"the consistency filter (--filter-model {queries.filter_model}, --filter-top-k {queries.top_k}) kept none of the "
            f"{consistency['checked']} queries (best rank of a query's own document: {int(consistency['best_rank'])}, median "
            f"{consistency['median_rank']}); the other filters dropped: {counts or 'nothing'}"
        )
    return f"the filters kept none of the {kept.candidates} candidate queries of {len(answers)} answers: {counts}"


def _finish(out: Path, documents: Documents, unique: list[str], config: GenerationConfig, queries: QueryConfig, requests: RequestRun,
            prompts: dict[str, QueryTemplate], tasks: list[Task], embedder: Any) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """Filter, write the rows (unless nothing is left, or a Ctrl-C or fatal error stopped a filtered
    run) and the summary; (summary with its ``_records``, why nothing was kept or None)."""
    first_id: dict[str, str] = {}
    for ident, text in zip(documents.ids, documents.texts, strict=True):
        first_id.setdefault(text, ident)
    answers = requests.progress.answers
    elapsed = requests.elapsed
    kept = _collect(config, queries, requests, prompts, tasks, unique, first_id)
    generated = len(kept.records)
    stopped = requests.interrupted or requests.progress.fatal is not None
    filtered = queries.filter_model is None or not stopped
    consistency = _consistency(kept, queries, unique, embedder) if filtered else None
    failure = None if stopped else _nothing_kept(kept, answers, consistency, queries)
    records = [{k: v for k, v in r.items() if k != "_document"} for r in kept.records]
    written = filtered and failure is None
    if written:
        atomic_write(out, lambda handle: handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    summary = _summary(out, documents, unique, config, queries, requests, prompts, tasks, kept, consistency, generated, elapsed)
    summary.update(written=written, nothing_kept=failure, complete=summary["complete"] and written)
    atomic_write_json(summary_path(out), summary)
    summary["_records"] = records if written else []
    return summary, failure


def _summary(out: Path, documents: Documents, unique: list[str], config: GenerationConfig, queries: QueryConfig, requests: RequestRun,
             prompts: dict[str, QueryTemplate], tasks: list[Task], kept: _Kept, consistency: dict[str, Any] | None, generated: int,
             elapsed: float) -> dict[str, Any]:  # fmt: skip
    answers = requests.progress.answers
    usage, cost = usage_and_cost(requests, config)
    done = len({t.index for t in answers})
    return {
        "out": str(out),
        "kind": "queries",
        "complete": len(answers) == len(tasks) and not requests.interrupted,
        "interrupted": requests.interrupted,
        "llms": [b.llm_id for b in requests.backends],
        "prompts": {style: {"prompt_id": p.prompt_id, "template_sha256": p.sha256, "template": p.template} for style, p in prompts.items()},
        "size": config.size,
        "documents": {
            "source": documents.source,
            "given": len(documents),
            "unique": len(unique),
            "duplicate_texts": len(documents) - len(unique),
            "done": done,
            "id_column": documents.id_column,
            "title_column": documents.title_column,
        },  # fmt: skip
        "requests": request_summary(requests, tasks),
        "errors": requests.progress.errors,
        "answer_formats": dict(kept.formats),
        "candidates": kept.candidates,
        "drops": dict(kept.drops),
        "filters": filter_counts(kept.drops),
        "consistency": consistency,
        "queries": {
            "generated": generated,
            "total": len(kept.records),
            "per_style": dict(Counter(r["style"] for r in kept.records)),
            "per_llm": dict(Counter(r["llm"] for r in kept.records)),
            "documents_with_queries": len({r["_document"] for r in kept.records}),
        },
        "usage": usage,
        "cost": cost,
        "load_s": round(requests.load_s, 3),
        "elapsed_s": round(elapsed, 3),
        "throughput_note": "elapsed_s and the rates exclude loading the backends (load_s) and the consistency filter, and count cache hits as "
        "done; queries_per_s counts the queries kept by the cleaning filters",
        "documents_per_s": round(done / elapsed, 4) if elapsed > 0 else None,
        "queries_per_s": round(generated / elapsed, 4) if elapsed > 0 else None,
        "requests_per_s": round(len(answers) / elapsed, 4) if elapsed > 0 else None,
        "config": {k: v for k, v in asdict(config).items() if k not in ("progress", "kinds", "templates", "positive_label", "negative_label")},
        "query_config": asdict(queries),
    }


__all__ = ["QueryConfig", "generate_queries"]
