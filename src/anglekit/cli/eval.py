"""``anglekit eval MODEL``: pair datasets (``--data``) and the papers' evaluation suites (``--suite``)."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from anglekit.cli.common import add_model_options, add_output, add_output_dir, load_setting, load_settings
from anglekit.cli.fields import add_setting
from anglekit.errors import AnglekitError, ConfigError, UnsupportedModelError
from anglekit.io.atomic import atomic_write_json

NAME = "eval"
OTHER_BACKENDS = ("anglekit", "sentence-transformers")
"""``--backend`` values of eval beyond the registered inference backends."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="evaluate a model: pair datasets (--data) and the papers' suites (--suite)",
        description="Spearman/Pearson x 100 of cosine vs gold on pair datasets (--data), and the AnglE/SimACE "
        "evaluation suites (--suite sts|non-transfer|transfer|retrieval|geometry|all). Works on anglekit models, "
        "any Hugging Face encoder and sentence-transformers directories.",
    )
    add_model_options(parser)
    add_eval_arguments(parser)
    return parser


BUILTIN_SUITES = ("sts", "non-transfer", "transfer", "retrieval", "geometry")


def _suite_names() -> list[str]:
    """The built-in suites and the installed plugins' (their entry points' names: nothing is imported)."""
    from anglekit.plugins import GROUPS, installed_plugins

    return [*BUILTIN_SUITES, *(name for name, _ in installed_plugins(GROUPS["eval_suites"]) if name not in BUILTIN_SUITES)]


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``anglekit eval`` beyond the shared model options."""
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="DATASET",
        help="pair dataset spec (stsb:test, a file, a directory, hf:name:split); with --suite retrieval (named, not through all): a retrieval set "
        "(a BEIR folder with corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv, a hub name, or flickr30k[:SPLIT]); repeatable",
    )
    add_output(parser, metavar="JSON", help="write the --data scores (with --suite retrieval: the retrieval metrics, ndcg@10 ...) as JSON to this file")
    parser.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help=f"{', '.join(_suite_names())} or all (repeatable)",
    )
    parser.add_argument(
        "--data-root",
        metavar="DIR",
        help="folder holding senteval/, stsb/, ... (default: $ANGLEKIT_DATA, else the per-user folder ~/.local/share/anglekit/data)",
    )
    add_output_dir(parser, old="--out", help="folder where suites write <suite>.json and <suite>.md (default: runs/eval/<model>)")
    parser.add_argument("--cache", metavar="DIR", help="embedding cache folder (default: $ANGLEKIT_CACHE/embeddings)")
    parser.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="SUITE.KEY=VALUE",
        help="a suite option, e.g. sts.variant=original or non-transfer.extra=[qqp.tsv] (YAML value)",
    )
    backend = load_setting("backend")  # the inference backends, and two of eval's own
    text = (
        f"{backend.help} Also anglekit (the same as torch) and sentence-transformers (auto falls back to it for models with modules anglekit does not apply)."
    )
    add_setting(parser, replace(backend, choices=(*(backend.choices or ()), *OTHER_BACKENDS), help=text))
    parser.set_defaults(backend="auto")


def parse_options(items: list[str], suites: list[str]) -> dict[str, dict[str, Any]]:
    """``SUITE.KEY=VALUE`` strings -> {suite: {key: value}}; values are read as YAML and checked
    against the suite's option types before any model is loaded."""
    import yaml

    from anglekit.evaluation.suites import check_suite_options

    options: dict[str, dict[str, Any]] = {}
    for item in items:
        head, sep, raw = item.partition("=")
        suite, dot, key = head.partition(".")
        if not sep or not dot or not suite or not key:
            raise ConfigError(f"--option {item!r}: expected SUITE.KEY=VALUE")
        if suite not in suites:
            raise ConfigError(f"--option {item!r}: suite {suite!r} is not being run ({', '.join(suites)})")
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"--option {item!r}: cannot read the value as YAML ({problem})") from exc
        options.setdefault(suite, {})[key] = value
    return {suite: check_suite_options(suite, values) for suite, values in options.items()}


def _data_name(spec: str, dataset: Any) -> str:
    """How an error names a ``--data`` dataset: the spec and the file it resolved to."""
    source = str(getattr(dataset, "source", "") or "")
    return f"--data {spec}" + (f" ({source})" if source and source != spec else "")


def load_model(args: argparse.Namespace) -> Any:
    """The model to evaluate: an Embedder, or (``--backend sentence-transformers``, or ``auto`` for a
    model whose modules anglekit does not apply) a sentence-transformers encoder."""
    from anglekit.model.embedder import Embedder

    if args.backend == "sentence-transformers":
        return _sentence_transformer(args)
    backend = "torch" if args.backend == "anglekit" else args.backend
    try:
        return Embedder.from_pretrained(args.model, settings=load_settings(args, backend=backend))
    except UnsupportedModelError:
        if args.backend == "auto":
            return _sentence_transformer(args)
        raise


def _sentence_transformer(args: argparse.Namespace) -> Any:
    from anglekit.evaluation.encoders import load_sentence_transformer
    from anglekit.model.devices import default_device

    device = args.device or str(default_device())
    if args.precision not in (None, "auto"):
        raise ConfigError(f"--precision {args.precision}: applies to anglekit's backends (torch, onnx, openvino), not to sentence-transformers")
    try:
        return load_sentence_transformer(args.model, device=device, max_length=args.max_length, batch_size=args.batch_size, progress=not args.quiet)
    except ImportError as exc:
        raise ConfigError("--backend sentence-transformers needs the package: pip install 'anglekit[bench]'") from exc


def run(args: argparse.Namespace) -> int:
    from anglekit.data.catalog import resolve_dataset
    from anglekit.evaluation.suites import SUITES, run_suites
    from anglekit.metrics.similarity import check_scorable, evaluate_pairs

    if not args.data and not args.suite:
        raise AnglekitError("give at least one --data DATASET or --suite NAME")
    suites = list(SUITES) if "all" in args.suite else list(dict.fromkeys(args.suite))
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ConfigError(f"unknown suite(s) {unknown}; choose from {', '.join(SUITES)} or all")
    options = parse_options(args.option, suites)
    retrieval_specs = _retrieval_data(args, options)
    datasets = [] if retrieval_specs else [(spec, resolve_dataset(spec, default_split="test")) for spec in args.data]
    for spec, dataset in datasets:  # an undefined score is found before the model loads, and names its data
        check_scorable(dataset.labels, _data_name(spec, dataset))
    model = load_model(args)

    if datasets:
        encode = model if callable(model) and not hasattr(model, "encode") else partial(model.encode, batch_size=args.batch_size, show_progress=not args.quiet)
        results: dict[str, Any] = {"model": args.model, "datasets": {}}
        print(f"{'dataset':<40} {'pairs':>7} {'spearman':>9} {'pearson':>9}")
        for spec, dataset in datasets:
            scores = evaluate_pairs(encode, dataset.text1, dataset.text2, dataset.labels, source=_data_name(spec, dataset))
            results["datasets"][spec] = scores.as_dict()
            print(f"{spec:<40} {scores.n_pairs:>7} {scores.spearman:>9.2f} {scores.pearson:>9.2f}")
        if args.output:
            atomic_write_json(args.output, results)

    if suites:
        out = Path(args.output_dir) if args.output_dir else Path("runs") / "eval" / Path(os.path.normpath(args.model)).name
        cache: bool | str = False if args.no_cache else (args.cache or True)
        max_length = getattr(getattr(model, "config", None), "max_length", None) if args.max_length is None else args.max_length
        produced = run_suites(
            suites,
            model,
            data_root=args.data_root,
            out_dir=out,
            batch_size=args.batch_size,
            max_length=max_length,
            cache=cache,
            model_name=args.model,
            progress=not args.quiet,
            options=options,
        )
        for name in produced:
            print((out / f"{name}.md").read_text(encoding="utf-8"))
        print(f"results in {out}/")
        if retrieval_specs and args.output:
            found = produced["retrieval"]
            atomic_write_json(
                args.output,
                {
                    "model": args.model,
                    "search": found["protocol"]["search"],
                    "prompts": found["protocol"]["prompts"],
                    "sets": found["sets"],
                    "mean": found["scores"],
                },
            )
    return 0


def _retrieval_data(args: argparse.Namespace, options: dict[str, dict[str, Any]]) -> list[str]:
    """With ``--suite retrieval`` (named, not through ``all``), the ``--data`` specs are retrieval
    sets: read (and checked) now, before the model loads, and handed to the suite as its ``data`` option."""
    if "retrieval" not in args.suite or not args.data:
        return []
    from anglekit.data.catalog import default_data_root
    from anglekit.evaluation.retrieval import retrieval_set

    if "data" in options.get("retrieval", {}):
        raise ConfigError("give the retrieval sets with --data or with --option retrieval.data=..., not both")
    root = Path(args.data_root).expanduser() if args.data_root else default_data_root()
    split = options.get("retrieval", {}).get("split", "test")
    for spec in args.data:
        retrieval_set(spec, root, split=split)
    options.setdefault("retrieval", {})["data"] = tuple(args.data)
    return list(args.data)
