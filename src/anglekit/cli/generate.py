"""``anglekit generate``: labelled pairs from unlabelled sentences with one or more LLMs (see docs/generation.md).

Every flag is generated from typed settings: the run's own (:class:`GenerateFlags`: what it reads,
and the flags GenerationConfig holds in another shape) and every setting of
:class:`~anglekit.generation.pipeline.GenerationConfig` (the sampling, cleaning and retry settings
declared on GenerationParams, CleaningConfig and RetryPolicy), with their help, defaults and ranges;
the parsed flags build the configs by name."""

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
from anglekit.errors import EXIT_PARTIAL, ConfigError

NAME = "generate"

KIND_CHOICES = ("synonym", "antonym", "both")


@dataclass
class GenerateFlags:
    """The flags of ``anglekit generate`` beside GenerationConfig's settings: the input (the output is
    ``--output``), and the flags whose values GenerationConfig holds in another shape (``kinds``,
    ``templates``, ``progress``: :meth:`config_values`)."""

    input: str = setting(help="sentences: .txt (one per line) or a csv/tsv/jsonl/json/parquet column")
    column: str | None = setting(None, help="column holding the sentences in a tabular input (default: text, sentence or the only one)")
    limit: int | None = setting(None, parse=positive_int, metavar="N", help="use only the first N sentences")
    kind: str = setting("both", choices=KIND_CHOICES, help="which pairs to generate")
    synonym_template: str | None = setting(None, help="template with {text} (and {size}) for synonyms (default: the paper's)")
    antonym_template: str | None = setting(None, help="template with {text} (and {size}) for antonyms (default: the paper's)")
    quiet: bool = setting(False, help="no progress bar")

    def __post_init__(self) -> None:
        check_fields(self)

    def config_values(self) -> dict[str, Any]:
        """GenerationConfig's ``kinds``, ``templates`` and ``progress``, as these flags give them."""
        templates = {k: v for k, v in (("synonym", self.synonym_template), ("antonym", self.antonym_template)) if v}
        kinds = ("synonym", "antonym") if self.kind == "both" else (self.kind,)
        return {"kinds": kinds, "templates": templates, "progress": not self.quiet}


DERIVED = ("kinds", "templates", "progress")
"""GenerationConfig's settings given through :class:`GenerateFlags` (``--kind``, ``--*-template``, ``--quiet``)."""
REQUIRED = ("input", "llm")
"""The flags the command line must give."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``generate`` on an argparse subparsers object."""
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
        help="generate synonym/antonym pairs from raw sentences with LLMs (train data for `anglekit train`)",
        description="Ask one or more LLMs for synonymous and antonymous sentences of each input sentence (the AnglE "
        "paper's prompts by default) and write positive/negative pairs with provenance as JSON Lines. Answers are "
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
    parser.set_defaults(_flags=flags, _settings=settings)


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


def run(args: argparse.Namespace) -> int:
    """Run ``anglekit generate``: 0 when complete, 3 when some requests failed (rerun to retry), 130 on Ctrl-C."""
    from anglekit.data.readers import read_texts
    from anglekit.generation.pipeline import generate_pairs, summary_path

    _restore_sigint()
    flags = flags_from_args(args)
    config = config_from_args(args)
    _check_hf_options(config)
    _check_not_input(flags, args.output, config)
    texts = read_texts(flags.input, column=flags.column)
    if flags.limit is not None:
        texts = texts[: flags.limit]
    try:
        result = generate_pairs(texts, args.output, config)
    except KeyboardInterrupt:
        print(f"anglekit generate: interrupted; answers so far are cached, rerun to resume (summary: {summary_path(args.output)})", file=sys.stderr)
        if any(t.name.startswith("anglekit-generate") and t.is_alive() for t in threading.enumerate()):
            # Requests still in flight would hold the exit for up to --timeout x retries: abandon them (their
            # answers are not cached and are asked again on resume; all else is already written atomically).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130
    print(_report(result.summary), file=sys.stderr)
    if result.summary["requests"]["failed"]:
        print(f"anglekit generate: {result.summary['requests']['failed']} requests failed; rerun to retry them", file=sys.stderr)
        return EXIT_PARTIAL
    return 0


__all__ = ["EXIT_PARTIAL", "GenerateFlags", "add_parser", "config_from_args", "flags_from_args", "run"]
