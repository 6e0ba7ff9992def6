"""``anglekit generate``: labelled pairs from unlabelled sentences, or queries from documents
(``--kind queries``), with one or more LLMs (see docs/generation.md).

Every flag is generated from typed settings: the run's own (:class:`GenerateFlags`: what it reads,
and the flags the configs hold in another shape), every setting of
:class:`~anglekit.generation.pipeline.GenerationConfig` (the sampling, cleaning and retry settings
declared on GenerationParams, CleaningConfig and RetryPolicy) and of
:class:`~anglekit.generation.queries.QueryConfig`, with their help, defaults and ranges; the parsed
flags build the configs by name."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from anglekit.cli.common import add_output
from anglekit.cli.fields import add_setting
from anglekit.config import Setting, check_fields, setting, settings_of
from anglekit.config.fields import positive_int
from anglekit.errors import ConfigError

NAME = "generate"

EXIT_PARTIAL = 3
"""Exit status when some requests failed for good (the output holds the rest; rerun to retry)."""

KIND_CHOICES = ("synonym", "antonym", "both", "queries")
STYLE_CHOICES = ("question", "keyword", "both")


@dataclass
class GenerateFlags:
    """The flags of ``anglekit generate`` beside GenerationConfig's settings: the input (the output is
    ``--output``), and the flags whose values GenerationConfig holds in another shape (``kinds``,
    ``templates``, ``progress``: :meth:`config_values`)."""

    input: str = setting(
        help="sentences: .txt (one per line) or a csv/tsv/jsonl/json/parquet column; --kind queries: documents: .txt (one a line) "
        "or a csv/tsv/jsonl/parquet table with text (and id, title; a BEIR corpus.jsonl)"
    )
    column: str | None = setting(None, help="column holding the sentences or documents in a tabular input (default: text, sentence or the only one)")
    limit: int | None = setting(None, parse=positive_int, metavar="N", help="use only the first N sentences (documents)")
    kind: str = setting("both", choices=KIND_CHOICES, help="which pairs to generate: synonym/antonym pairs, or queries for documents")
    synonym_template: str | None = setting(None, help="template with {text} (and {size}) for synonyms (default: the paper's)")
    antonym_template: str | None = setting(None, help="template with {text} (and {size}) for antonyms (default: the paper's)")
    query_style: str | None = setting(None, choices=STYLE_CHOICES, help="--kind queries: the queries to ask for (default: question)")
    question_template: str | None = setting(
        None, metavar="TEMPLATE|@FILE", help="--kind queries: template with {document} (and {size}) for question-style queries, or @FILE"
    )
    keyword_template: str | None = setting(
        None, metavar="TEMPLATE|@FILE", help="--kind queries: template with {document} (and {size}) for keyword-style queries, or @FILE"
    )
    quiet: bool = setting(False, help="no progress bar")

    def __post_init__(self) -> None:
        check_fields(self)

    def config_values(self) -> dict[str, Any]:
        """GenerationConfig's ``kinds``, ``templates`` and ``progress``, as these flags give them."""
        templates = {k: v for k, v in (("synonym", self.synonym_template), ("antonym", self.antonym_template)) if v}
        values: dict[str, Any] = {"templates": templates, "progress": not self.quiet}
        if self.kind != "queries":
            values["kinds"] = ("synonym", "antonym") if self.kind == "both" else (self.kind,)
        return values

    def query_values(self) -> dict[str, Any]:
        """QueryConfig's ``styles`` and ``templates`` (a ``@FILE`` value read), as these flags give them."""
        from anglekit.generation.query_prompts import template_value

        style = self.query_style or "question"
        templates = {
            k: template_value(v, f"--{k}-template") for k, v in (("question", self.question_template), ("keyword", self.keyword_template)) if v is not None
        }
        return {"styles": ("question", "keyword") if style == "both" else (style,), "templates": templates}


DERIVED = ("kinds", "templates", "progress")
"""GenerationConfig's settings given through :class:`GenerateFlags` (``--kind``, ``--*-template``, ``--quiet``)."""
QUERY_DERIVED = ("styles", "templates")
"""QueryConfig's settings given through :class:`GenerateFlags` (``--query-style``, ``--question-template``, ``--keyword-template``)."""
QUERY_FLAGS = ("query_style", "question_template", "keyword_template")
"""The run's own flags that apply to ``--kind queries`` only."""
REQUIRED = ("input", "llm")
"""The flags the command line must give."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``generate`` on an argparse subparsers object."""
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
        help="generate synonym/antonym pairs from raw sentences, or queries from documents, with LLMs (train data for `anglekit train`)",
        description="Ask one or more LLMs for synonymous and antonymous sentences of each input sentence (the AnglE "
        "paper's prompts by default) and write positive/negative pairs with provenance as JSON Lines; or, with --kind "
        "queries, for the queries each document answers, written as (anchor, positive) rows that `anglekit mine` and "
        "`anglekit train` read, cleaned and optionally checked by a consistency filter (--filter-model). Answers are "
        "cached on disk, so an interrupted run resumes without asking again.",
    )
    _add_arguments(parser)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of :class:`GenerateFlags` and of every setting of GenerationConfig, in groups: the
    run's own, then the settings declared on GenerationConfig, then those of each part it holds flat."""
    from anglekit.generation.backends import GenerationParams
    from anglekit.generation.backends.openai_compat import RetryPolicy
    from anglekit.generation.cleaning import CleaningConfig
    from anglekit.generation.pipeline import GenerationConfig

    run = parser.add_argument_group("input, output, prompts and progress")
    flags = settings_of(GenerateFlags)
    for s in flags:
        add_setting(run, s, required=s.key in REQUIRED)
        if s.key == "limit":  # after the input's flags
            add_output(run, required=True, old="--out", metavar="FILE.jsonl", help="output pairs (.jsonl); the summary goes to <output>.summary.json")
    parts = {GenerationParams: "sampling", CleaningConfig: "cleaning", RetryPolicy: "retries (openai: LLMs)"}
    part_of = {f.name: title for part, title in parts.items() for f in dataclasses.fields(part)}
    own = "LLMs, labels and operation"
    groups = {title: parser.add_argument_group(title) for title in (own, *parts.values())}
    settings = [s for s in settings_of(GenerationConfig) if s.name not in DERIVED]
    for s in settings:
        add_setting(groups[part_of.get(s.name, own)], s, required=s.key in REQUIRED)
    from anglekit.generation.queries import QueryConfig

    queries = parser.add_argument_group("queries (--kind queries)")
    query_settings = [s for s in settings_of(QueryConfig) if s.name not in QUERY_DERIVED]
    for s in query_settings:
        add_setting(queries, s)
    parser.set_defaults(_flags=flags, _settings=settings, _query_settings=query_settings)


def _given(args: argparse.Namespace, settings: list[Setting]) -> dict[str, Any]:
    """{field name: value} of the settings given on the command line (the parser suppresses the rest)."""
    return {s.name: getattr(args, s.key) for s in settings if hasattr(args, s.key)}


def flags_from_args(args: argparse.Namespace) -> GenerateFlags:
    """The run's own flags, typed."""
    return GenerateFlags(**_given(args, args._flags))


def config_from_args(args: argparse.Namespace) -> Any:
    """The GenerationConfig of the parsed flags: each setting given by its flag, the rest its default."""
    from anglekit.generation.pipeline import GenerationConfig

    return GenerationConfig(**_given(args, args._settings), **flags_from_args(args).config_values())


def query_config_from_args(args: argparse.Namespace) -> Any:
    """The QueryConfig of the parsed flags (``--kind queries``)."""
    from anglekit.generation.queries import QueryConfig

    return QueryConfig(**_given(args, args._query_settings), **flags_from_args(args).query_values())


def _check_kind_flags(args: argparse.Namespace, flags: GenerateFlags) -> None:
    """Flags of the other kind would be ignored: an error naming them instead."""
    if flags.kind == "queries":
        return
    own = [s for s in args._flags if s.name in QUERY_FLAGS]
    given = [s.flags[0] for s in (*own, *args._query_settings) if hasattr(args, s.key)]
    if given:
        raise ConfigError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --kind queries only, and --kind is {flags.kind}")


def _query_report(summary: dict[str, Any]) -> str:
    req = summary["requests"]
    queries = summary["queries"]
    consistency = summary.get("consistency")
    lines = [
        f"queries: {queries['total']} for {queries['documents_with_queries']} of {summary['documents']['unique']} documents -> {summary['out']}",
        f"requests: {req['answered']}/{req['total']} answered ({req['sent']} sent, {req['cache_hits']} from cache), "
        f"{req['retries']} retries, {req['failed']} failed",
        "dropped by filter: " + ", ".join(f"{name} {n}" for name, n in summary["filters"].items()),
        f"throughput: {summary['queries_per_s']} queries/s, {summary['documents_per_s']} documents/s",
    ]
    if consistency:
        lines.append(
            f"consistency ({consistency['model']}, top {consistency['top_k']}): kept {consistency['kept']} of {consistency['checked']}, "
            f"median rank {consistency['median_rank']}, {consistency['seconds']} s"
        )
    if summary.get("usage"):
        cost = f", cost {summary['cost']:.4f}" if summary.get("cost") is not None else ""
        lines.append(f"tokens: {summary['usage']['prompt_tokens']} prompt, {summary['usage']['completion_tokens']} completion{cost}")
    return "\n".join(lines)


def _report(summary: dict[str, Any]) -> str:
    req = summary["requests"]
    pairs = summary["pairs"]
    lines = [
        f"pairs: {pairs['total']} ({pairs['positive']} positive, {pairs['negative']} negative) -> {summary['out']}",
        f"requests: {req['answered']}/{req['total']} answered ({req['sent']} sent, {req['cache_hits']} from cache), "
        f"{req['retries']} retries, {req['failed']} failed",
        *(f"drops ({kind}): " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none") for kind, counts in summary["drops_by_kind"].items()),
        f"throughput: {summary['sentences_per_s']} sentences/s",
    ]
    if summary.get("usage"):
        cost = f", cost {summary['cost']:.4f}" if summary.get("cost") is not None else ""
        lines.append(f"tokens: {summary['usage']['prompt_tokens']} prompt, {summary['usage']['completion_tokens']} completion{cost}")
    return "\n".join(lines)


def _check_hf_options(config: Any) -> None:
    """The hf: backends' options given without an hf: LLM would be ignored: an error instead."""
    from anglekit.generation.pipeline import HF_OPTIONS, GenerationConfig

    if any(spec.startswith("hf:") for spec in config.llms):
        return
    defaults = {s.name: s for s in settings_of(GenerationConfig)}
    given = [defaults[name].flags[0] for name in HF_OPTIONS if getattr(config, name) != defaults[name].default]
    if given:
        raise ConfigError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to hf: LLMs only, and no --llm hf:NAME is given")


def _check_not_input(flags: GenerateFlags, output: str, config: Any) -> None:
    """The pairs, the summary and the cache are never written over the input (symlinks resolved)."""
    from anglekit.generation.pipeline import default_cache_dir, summary_path

    source = os.path.realpath(flags.input)
    for what, path in (("--output", output), ("the summary", summary_path(output)), ("--cache", config.cache_dir or default_cache_dir(output))):
        real = os.path.realpath(path)
        if real == source:
            raise ConfigError(f"{what} {path} would overwrite the input {flags.input}; write the pairs elsewhere")


def _restore_sigint() -> None:
    """Make SIGINT interrupt the run even when it was ignored at start.

    A shell without job control starts ``anglekit generate ... &`` with SIGINT ignored, so a
    ``kill -INT`` (or Ctrl-C to the script) was dropped: the run went on to the end and exited 0.
    Stopping is always safe here (answers are cached, the output is written atomically, exit 130),
    so SIGINT raises ``KeyboardInterrupt`` whatever the parent chose.
    """
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _generate(args: argparse.Namespace, flags: GenerateFlags, config: Any) -> Any:
    """Read the input and run the generation its kind asks for."""
    from anglekit.data.readers import read_texts
    from anglekit.generation.documents import read_documents
    from anglekit.generation.pipeline import generate_pairs
    from anglekit.generation.queries import generate_queries

    if flags.kind == "queries":
        queries = query_config_from_args(args)
        documents = read_documents(flags.input, text_column=flags.column, limit=flags.limit)
        return generate_queries(documents, args.output, config, queries)
    texts = read_texts(flags.input, column=flags.column)
    if flags.limit is not None:
        texts = texts[: flags.limit]
    return generate_pairs(texts, args.output, config)


def run(args: argparse.Namespace) -> int:
    """Run ``anglekit generate``: 0 when complete, 3 when some requests failed (rerun to retry), 130 on Ctrl-C."""
    from anglekit.generation.pipeline import summary_path

    _restore_sigint()
    flags = flags_from_args(args)
    _check_kind_flags(args, flags)
    config = config_from_args(args)
    _check_hf_options(config)
    _check_not_input(flags, args.output, config)
    try:
        result = _generate(args, flags, config)
    except KeyboardInterrupt:
        print(f"anglekit generate: interrupted; answers so far are cached, rerun to resume (summary: {summary_path(args.output)})", file=sys.stderr)
        if any(t.name.startswith("anglekit-generate") and t.is_alive() for t in threading.enumerate()):
            # Requests still in flight would hold the exit for up to --timeout x retries: abandon them (their
            # answers are not cached and are asked again on resume; all else is already written atomically).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130
    print((_query_report if flags.kind == "queries" else _report)(result.summary), file=sys.stderr)
    if result.summary["requests"]["failed"]:
        print(f"anglekit generate: {result.summary['requests']['failed']} requests failed; rerun to retry them", file=sys.stderr)
        return EXIT_PARTIAL
    return 0


__all__ = ["EXIT_PARTIAL", "GenerateFlags", "add_parser", "config_from_args", "flags_from_args", "query_config_from_args", "run"]
