"""``anglekit generate``: labelled pairs from unlabelled sentences with one or more LLMs (see docs/generation.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from anglekit.cli.common import DTYPE_CHOICES, add_output, add_quiet, device_name, number, positive_int
from anglekit.errors import ConfigError

NAME = "generate"

EXIT_PARTIAL = 3
"""Exit status when some requests failed for good (the output holds the rest; rerun to retry)."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``generate`` on an argparse subparsers object."""
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="generate synonym/antonym pairs from raw sentences with LLMs (train data for `anglekit train`)",
        description="Ask one or more LLMs for synonymous and antonymous sentences of each input sentence (the AnglE "
        "paper's prompts by default) and write positive/negative pairs with provenance as JSON Lines. Answers are "
        "cached on disk, so an interrupted run resumes without asking again.",
    )
    _add_arguments(parser)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", required=True, help="sentences: .txt (one per line) or a csv/tsv/jsonl/json/parquet column")
    io.add_argument("--column", default=None, help="column holding the sentences in a tabular input (default: text, sentence or the only one)")
    io.add_argument("--limit", type=positive_int, default=None, help="use only the first N sentences")
    add_output(io, required=True, old="--out", metavar="FILE.jsonl", help="output pairs (.jsonl); the summary goes to <output>.summary.json")
    io.add_argument("--cache", default=None, help="answer cache folder (default: <output>.cache/)")
    llm = parser.add_argument_group("LLMs")
    llm.add_argument(
        "--llm",
        action="append",
        required=True,
        metavar="SPEC",
        help="openai:MODEL[@BASE_URL] (any OpenAI-compatible server: vLLM, llama.cpp, Ollama, hosted APIs) or hf:NAME "
        "(in-process transformers: hub name, folder, .gguf, pypi:smollm2-135m-instruct); repeat for an ensemble",
    )
    llm.add_argument("--base-url", default=None, help="base URL for openai: specs without @URL (default: $OPENAI_BASE_URL or https://api.openai.com/v1)")
    llm.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key (never passed as a flag)")
    llm.add_argument(
        "--device",
        type=device_name,
        default=None,
        metavar="DEVICE",
        help="hf: backends: cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)",
    )
    llm.add_argument("--dtype", default=None, choices=DTYPE_CHOICES, help="hf: backends: load the weights in this dtype (default: as stored)")
    llm.add_argument("--revision", default=None, help="hf: backends: hub revision of the model: branch, tag or commit (default: the main branch)")
    llm.add_argument("--trust-remote-code", action="store_true", help="hf: backends: run the model repository's own code")
    llm.add_argument("--batch-size", type=positive_int, default=1, metavar="N", help="hf: backends: prompts per generate call (batches concurrent requests)")
    prompt = parser.add_argument_group("prompts and labels")
    prompt.add_argument("--kind", choices=("synonym", "antonym", "both"), default="both", help="which pairs to generate")
    prompt.add_argument("--size", type=positive_int, default=3, help="sentences asked for per prompt ({size}); at most this many kept")
    prompt.add_argument("--synonym-template", default=None, help="template with {text} (and {size}) for synonyms (default: the paper's)")
    prompt.add_argument("--antonym-template", default=None, help="template with {text} (and {size}) for antonyms (default: the paper's)")
    prompt.add_argument("--positive-label", type=float, default=1.0, help="label of (input, synonym) pairs")
    prompt.add_argument("--negative-label", type=float, default=0.0, help="label of (input, antonym) pairs")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--temperature", type=number(float, 0), default=0.7)
    sampling.add_argument("--top-p", type=number(float, 0, 1, exclusive_minimum=True), default=1.0)
    sampling.add_argument("--max-tokens", type=positive_int, default=256, help="tokens generated per answer at most")
    sampling.add_argument("--seed", type=number(int, 0), default=0, help="sampling seed (sent to the server; seeds hf: sampling)")
    clean = parser.add_argument_group("cleaning")
    clean.add_argument("--min-chars", type=number(int, 0), default=3)
    clean.add_argument("--max-chars", type=positive_int, default=512)
    clean.add_argument(
        "--near-duplicate-ratio",
        type=number(float, 0, 1),
        default=0.95,
        help="difflib ratio for near-duplicates: a synonym vs its input, a sentence vs the earlier ones of its "
        "answer; antonyms are never compared with their input (1 disables)",
    )
    ops = parser.add_argument_group("operation")
    ops.add_argument("--concurrency", type=positive_int, default=4, help="requests in flight at most (hf: backends run one at a time)")
    ops.add_argument("--max-retries", type=number(int, 0), default=5, help="retries on 408/409/425/429/5xx/timeouts/connection errors")
    ops.add_argument(
        "--max-repeated-errors",
        type=positive_int,
        default=3,
        metavar="N",
        help="stop the run when the server rejects requests with the same 4xx status and message N times in a row",
    )
    ops.add_argument("--timeout", type=number(float, 0, exclusive_minimum=True), default=60.0, help="seconds per HTTP request")
    ops.add_argument("--backoff-base", type=number(float, 0), default=1.0, help="first backoff in seconds (doubles; Retry-After wins)")
    ops.add_argument("--backoff-max", type=number(float, 0), default=60.0)
    ops.add_argument("--price-prompt", type=number(float, 0), default=None, help="cost per 1M prompt tokens, for the cost summary")
    ops.add_argument("--price-completion", type=number(float, 0), default=None, help="cost per 1M completion tokens")
    add_quiet(ops)


def config_from_args(args: argparse.Namespace) -> Any:
    from anglekit.generation.pipeline import GenerationConfig

    templates = {k: v for k, v in (("synonym", args.synonym_template), ("antonym", args.antonym_template)) if v}
    kinds = ("synonym", "antonym") if args.kind == "both" else (args.kind,)
    return GenerationConfig(
        llms=list(args.llm),
        kinds=kinds,
        size=args.size,
        templates=templates,
        positive_label=args.positive_label,
        negative_label=args.negative_label,
        concurrency=args.concurrency,
        max_retries=args.max_retries,
        timeout=args.timeout,
        backoff_base=args.backoff_base,
        backoff_max=args.backoff_max,
        max_repeated_errors=args.max_repeated_errors,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        seed=args.seed,
        min_chars=args.min_chars,
        max_chars=args.max_chars,
        near_duplicate_ratio=args.near_duplicate_ratio,
        api_key_env=args.api_key_env,
        base_url=args.base_url,
        cache_dir=args.cache,
        price_prompt=args.price_prompt,
        price_completion=args.price_completion,
        device=args.device,
        dtype=args.dtype,
        revision=args.revision,
        trust_remote_code=args.trust_remote_code,
        batch_size=args.batch_size,
        progress=not args.quiet,
    )


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


def _check_hf_options(args: argparse.Namespace) -> None:
    """The hf: backends' options given without an hf: LLM would be ignored: an error instead."""
    if any(spec.startswith("hf:") for spec in args.llm):
        return
    given = [
        flag
        for flag, value in (
            ("--device", args.device),
            ("--dtype", args.dtype),
            ("--revision", args.revision),
            ("--trust-remote-code", args.trust_remote_code or None),
            ("--batch-size", None if args.batch_size == 1 else args.batch_size),
        )
        if value is not None
    ]
    if given:
        raise ConfigError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to hf: LLMs only, and no --llm hf:NAME is given")


def _check_not_input(args: argparse.Namespace) -> None:
    """The pairs, the summary and the cache are never written over the input (symlinks resolved)."""
    from anglekit.generation.pipeline import default_cache_dir, summary_path

    source = os.path.realpath(args.input)
    for what, path in (("--output", args.output), ("the summary", summary_path(args.output)), ("--cache", args.cache or default_cache_dir(args.output))):
        real = os.path.realpath(path)
        if real == source:
            raise ConfigError(f"{what} {path} would overwrite the input {args.input}; write the pairs elsewhere")


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
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    _check_hf_options(args)
    _check_not_input(args)
    config = config_from_args(args)
    texts = read_texts(args.input, column=args.column)
    if args.limit is not None:
        texts = texts[: args.limit]
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


__all__ = ["EXIT_PARTIAL", "add_parser", "config_from_args", "run"]
