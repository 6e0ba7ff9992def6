"""``run_adapt``: the stages of ``anglekit adapt`` in order, each reused when it finished on the same
inputs (:class:`~anglekit.adapt.stages.StageBook`), then the report.

The output folder::

    adapt.json  stages.json            the settings; each stage's status, command, inputs, time
    queries.jsonl (+ .summary.json)    generate --kind queries, filtered by the teacher
    pairs.jsonl, corpus-train.jsonl    the training queries and the mining corpus (the dev documents left out)
    dev/                               the held-out queries as a BEIR retrieval set (unless --eval-data)
    mined.jsonl (+ .summary.json)      mine --teacher: hard negatives with the teacher's scores
    eval/start, eval/trained, eval/merged-wW   eval --suite retrieval of each model
    train/ (train/model)               train's run folder and the trained model
    merged-wW/                         merge START train/model --weight W
    report.json, report.md
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.adapt import steps
from anglekit.adapt.config import AdaptConfig
from anglekit.adapt.report import build_report, report_markdown
from anglekit.adapt.stages import StageBook, fingerprint, write_json
from anglekit.errors import ConfigError
from anglekit.io.atomic import atomic_write_text

logger = logging.getLogger(__name__)


def adapt_paths(out: str | Path) -> dict[str, Path]:
    """Where each stage writes, under the output folder."""
    out = Path(out)
    return {
        "queries": out / "queries.jsonl", "pairs": out / "pairs.jsonl", "train_corpus": out / "corpus-train.jsonl", "dev": out / "dev",
        "mined": out / "mined.jsonl", "eval": out / "eval", "train": out / "train", "model": out / "train" / "model",
        "report_json": out / "report.json", "report_md": out / "report.md",
    }  # fmt: skip


def merged_name(weight: float) -> str:
    return f"merged-w{weight:g}"


@dataclass
class AdaptResult:
    """What :func:`run_adapt` did: the folder, the trained (and merged) models and the report."""

    output_dir: Path
    model_dir: Path
    merged: dict[float, Path]
    report: dict[str, Any]

    def text(self) -> str:
        return report_markdown(self.report, brief=True)


def _check_inputs(config: AdaptConfig) -> None:
    corpus = Path(config.corpus)
    if not corpus.is_file():
        raise ConfigError(f"--corpus {config.corpus}: no such file")
    if Path(config.output_dir).resolve() == corpus.resolve() or corpus.resolve().is_relative_to(Path(config.output_dir).resolve()):
        raise ConfigError(f"--corpus {config.corpus} lies inside --output-dir {config.output_dir}; keep the documents elsewhere")


def _data_inputs(config: AdaptConfig, paths: dict[str, Path]) -> dict[str, Any]:
    data = steps.eval_data(config, paths)
    where = Path(data.split(":")[0]) if config.eval_data and not Path(data).exists() else Path(data)
    return {"data": data, "fingerprint": fingerprint(where) if where.exists() else None}


def _score(book: StageBook, config: AdaptConfig, name: str, model: str | Path, model_input: dict[str, Any], paths: dict[str, Path]) -> dict[str, Any]:
    data = steps.eval_data(config, paths)
    out = paths["eval"] / name
    inputs = {**_data_inputs(config, paths), "model": model_input}
    return book.run(f"eval-{name}", steps.eval_command(config, model, data, out), inputs, [out / "retrieval.json"],
                    lambda: steps.evaluate(config, model, data, out), clean=[out])  # fmt: skip


def run_adapt(config: AdaptConfig, say: Callable[[str], None] | None = None) -> AdaptResult:
    """Run (or resume) every stage of ``config`` into ``config.output_dir`` and write the report."""
    say = say or logger.info
    _check_inputs(config)
    out = Path(config.output_dir)
    paths = adapt_paths(out)
    book = StageBook(out, config.recorded(), say)
    info: dict[str, Any] = {}
    q = paths["queries"]
    info["queries"] = book.run("queries", steps.queries_command(config, q), {"corpus": fingerprint(config.corpus)}, [q], lambda: steps.generate(config, q))
    split_outputs = [paths["pairs"], paths["train_corpus"]] + ([paths["dev"]] if config.eval_data is None else [])
    info["split"] = book.run(
        "split", f"(hold out the queries of {config.dev_fraction:g} of the documents, seed {config.seed}: {paths['dev']})" if config.eval_data is None
        else "(every query trains: --eval-data scores)", {"queries": fingerprint(q), "corpus": fingerprint(config.corpus)}, split_outputs,
        lambda: steps.split(config, q, paths), clean=[paths["dev"]],
    )  # fmt: skip
    m = paths["mined"]
    info["mine"] = book.run("mine", steps.mine_command(config, paths["pairs"], paths["train_corpus"], m),
                            {"pairs": fingerprint(paths["pairs"]), "corpus": fingerprint(paths["train_corpus"])}, [m],
                            lambda: steps.mine(config, paths["pairs"], paths["train_corpus"], m, say), clean=[m.with_name(m.name + ".mine")])  # fmt: skip
    scores = {"start": _score(book, config, "start", config.model, {"name": config.model}, paths)}
    info["train"] = book.run("train", steps.train_command(config, m, paths["train"]), {"mined": fingerprint(m)}, [paths["model"]],
                             lambda: steps.train(config, m, paths["train"]), clean=[paths["train"]])  # fmt: skip
    trained = fingerprint(paths["model"])
    scores["trained"] = _score(book, config, "trained", paths["model"], trained, paths)
    merged: dict[float, Path] = {}
    for weight in sorted(config.merge_weight or ()):
        name = merged_name(weight)
        folder = out / name
        book.run(name, steps.merge_command(config, paths["model"], weight, folder), {"model": trained}, [folder],
                 lambda w=weight, f=folder: steps.merge(config, paths["model"], w, f), clean=[folder])  # fmt: skip
        merged[weight] = folder
        scores[name] = _score(book, config, name, folder, fingerprint(folder), paths)
    report = build_report(config, book.stages, info, scores, paths)
    write_json(paths["report_json"], report)
    atomic_write_text(paths["report_md"], report_markdown(report))
    return AdaptResult(out, paths["model"], merged, report)


__all__ = ["AdaptResult", "adapt_paths", "merged_name", "run_adapt"]
