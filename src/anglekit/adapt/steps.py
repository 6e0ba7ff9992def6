"""The stages of ``anglekit adapt``, each calling the library function its step command calls:
``generate --kind queries`` (:func:`~anglekit.generation.generate_queries`), the dev split,
``mine --teacher`` (:func:`~anglekit.mining.mine_hard_negatives`), ``eval --suite retrieval``
(:func:`~anglekit.evaluation.suites.run_suite`), ``train`` (:func:`~anglekit.training.run.train`)
and ``merge`` (:func:`~anglekit.model.merge.merge_models`). Each returns what the report reads."""

from __future__ import annotations

import dataclasses
import json
import random
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anglekit.adapt.config import AdaptConfig
from anglekit.errors import DataError
from anglekit.io.atomic import atomic_write, atomic_write_text


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _options(values: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in values.items():
        if value is True:
            out.append(_flag(key))
        elif value is False:
            out.append("--no-" + key.replace("_", "-"))
        else:
            out += [_flag(key), *(str(v) for v in (value if isinstance(value, list | tuple) else [value]))]
    return out


def command(*words: Any) -> str:
    """The shell line of a step command (``None`` words and the pairs they end dropped before)."""
    return shlex.join(["anglekit", *(str(w) for w in words)])


# --------------------------------------------------------------------------- queries
def queries_command(config: AdaptConfig, out: Path) -> str:
    flt = config.filter
    words = ["generate", "--kind", "queries", "--input", config.corpus, "--llm", config.llm, "--size", config.size, "--query-style", config.query_style]
    words += ["--limit", config.limit] if config.limit is not None else []
    words += ["--filter-model", flt, "--filter-top-k", config.filter_top_k] if flt else []
    words += ["--filter-device", config.device] if flt and config.device else []
    return command(*words, *_options(config.generate_option), "--output", out)


def generate(config: AdaptConfig, out: Path) -> dict[str, Any]:
    """``anglekit generate --kind queries``: the queries, filtered; the summary's counts."""
    from anglekit.generation.documents import read_documents
    from anglekit.generation.pipeline import GenerationConfig
    from anglekit.generation.queries import QueryConfig, generate_queries

    query_fields = {f.name for f in dataclasses.fields(QueryConfig)}
    query_values = {k: v for k, v in config.generate_option.items() if k in query_fields}
    values = {k: v for k, v in config.generate_option.items() if k not in query_fields}
    values.setdefault("progress", not config.quiet)
    styles = ("question", "keyword") if config.query_style == "both" else (config.query_style,)
    flt = config.filter
    if flt:
        query_values.update(filter_model=flt, filter_top_k=config.filter_top_k)
        if config.device:
            query_values.setdefault("filter_device", config.device)
    generation = GenerationConfig(llms=[config.llm], size=config.size, **values)
    documents = read_documents(config.corpus, limit=config.limit)
    result = generate_queries(documents, out, generation, QueryConfig(styles=styles, **query_values))
    s = result.summary
    return {
        "documents": s["documents"], "candidates": s["candidates"], "drops": s["drops"], "filters": s["filters"],
        "consistency": s["consistency"], "queries": s["queries"], "requests": s["requests"], "queries_per_s": s["queries_per_s"],
        "elapsed_s": s["elapsed_s"], "load_s": s["load_s"], "llms": s["llms"],
    }  # fmt: skip


# --------------------------------------------------------------------------- the dev split
def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{path}, line {number}: not JSON ({exc})") from None
        if not isinstance(row, dict) or not isinstance(row.get("anchor"), str) or not isinstance(row.get("positive"), str):
            raise DataError(f"{path}, line {number}: expected an object with text 'anchor' and 'positive'")
        rows.append(row)
    if not rows:
        raise DataError(f"{path}: no queries")
    return rows


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write(path, lambda handle: handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def split(config: AdaptConfig, queries: Path, paths: dict[str, Path]) -> dict[str, Any]:
    """Hold out the queries of a seeded share of the documents as a BEIR retrieval set (every
    document its corpus; with ``--eval-data``, nothing held out); the rest are the training pairs,
    and the documents less the held-out ones the mining corpus."""
    from anglekit.generation.documents import read_documents

    rows = _read_jsonl(queries)
    documents = read_documents(config.corpus, limit=config.limit)
    by_text: dict[str, str] = {}
    for ident, text in zip(documents.ids, documents.texts, strict=True):
        by_text.setdefault(text, ident)
    doc_of = [str(r.get("doc_id", by_text.get(r["positive"], r["positive"]))) for r in rows]
    held: set[str] = set()
    if config.eval_data is None:
        with_queries = sorted(set(doc_of))
        count = max(1, round(config.dev_fraction * len(with_queries)))
        if count >= len(with_queries):
            raise DataError(
                f"{queries}: the queries name {len(with_queries)} document(s); holding {count} out for the dev set leaves none to train on (lower --dev-fraction, or give --eval-data)"
            )
        held = set(random.Random(config.seed).sample(with_queries, count))
    train = [r for r, d in zip(rows, doc_of, strict=True) if d not in held]
    dev = [(r, d) for r, d in zip(rows, doc_of, strict=True) if d in held]
    _write_jsonl(paths["pairs"], train)
    held_texts = {r["positive"] for r, _ in dev}
    corpus = [{"id": i, "text": t} for t, i in by_text.items() if t not in held_texts]
    _write_jsonl(paths["train_corpus"], corpus)
    if dev:
        folder = paths["dev"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "qrels").mkdir(exist_ok=True)
        _write_jsonl(folder / "corpus.jsonl", [{"_id": i, "text": t} for t, i in by_text.items()])
        _write_jsonl(folder / "queries.jsonl", [{"_id": f"q{n}", "text": r["anchor"]} for n, (r, _) in enumerate(dev)])
        atomic_write_text(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n" + "".join(f"q{n}\t{d}\t1\n" for n, (_, d) in enumerate(dev)))
    return {"train_pairs": len(train), "train_documents": len(set(doc_of) - held), "mining_corpus": len(corpus), "dev_queries": len(dev),
            "dev_documents": len(held), "dev_corpus": len(by_text) if dev else 0}  # fmt: skip


# --------------------------------------------------------------------------- mining
def mine_command(config: AdaptConfig, pairs: Path, corpus: Path, out: Path) -> str:
    words = ["mine", config.model, "--input", pairs, "--corpus", corpus, "--num-negatives", config.num_negatives]
    words += ["--relative-margin", config.relative_margin] if config.relative_margin is not None else []
    words += ["--teacher", config.teacher]
    words += ["--teacher-max-ratio", config.teacher_max_ratio] if config.teacher_max_ratio is not None else []
    words += ["--device", config.device] if config.device else []
    return command(*words, *_options(config.mine_option), "--output", out)


def mine(config: AdaptConfig, pairs: Path, corpus: Path, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """``anglekit mine --teacher``: hard negatives with the teacher's scores; the summary's counts."""
    from anglekit.mining.mine import mine_hard_negatives
    from anglekit.mining.settings import MineSettings, TeacherSettings

    settings = MineSettings(num_negatives=config.num_negatives, relative_margin=config.relative_margin, **config.mine_option)
    kwargs = {"device": config.device} if config.device else {}
    report = mine_hard_negatives(
        config.model, pairs, out, corpus=corpus, settings=settings, model_kwargs=kwargs, teacher=config.teacher,
        teacher_settings=TeacherSettings(teacher_max_ratio=config.teacher_max_ratio), show_progress=not config.quiet, say=say,
    )  # fmt: skip
    s = report.summary
    keys = ("pairs", "rows_written", "negatives_per_row", "skipped", "corpus_rows", "pool_rows", "scores", "teacher", "seconds", "settings")
    return {k: s.get(k) for k in keys}


# --------------------------------------------------------------------------- scoring
def eval_data(config: AdaptConfig, paths: dict[str, Path]) -> str:
    """The retrieval set scored before and after: ``--eval-data``, else the held-out dev folder."""
    return config.eval_data or str(paths["dev"])


def eval_command(config: AdaptConfig, model: str | Path, data: str, out: Path) -> str:
    device = ["--device", config.device] if config.device else []
    return command("eval", model, "--suite", "retrieval", "--data", data, "--max-length", config.max_length, *device, "--no-cache", "--output-dir", out)


def evaluate(config: AdaptConfig, model: str | Path, data: str, out: Path) -> dict[str, Any]:
    """``anglekit eval --suite retrieval --data SET``: the model's scores on the retrieval set."""
    from anglekit.evaluation.suites import run_suite
    from anglekit.model.embedder import Embedder

    kwargs = {"device": config.device} if config.device else {}
    embedder = Embedder.from_pretrained(str(model), max_length=config.max_length, **kwargs)
    result = run_suite("retrieval", embedder, out_dir=out, max_length=config.max_length, progress=not config.quiet, data=[data])
    return {"model": str(model), "scores": result["scores"], "sets": result["sets"]}


# --------------------------------------------------------------------------- training and merging
def train_values(config: AdaptConfig, data: Path, out: Path, resume: bool) -> dict[str, Any]:
    """The TrainConfig's flat settings, as ``anglekit train`` builds them from its flags."""
    values: dict[str, Any] = dict(
        model=config.model, train_data=str(data), objective=config.objective, max_length=config.max_length, epochs=config.epochs,
        batch_size=config.batch_size, learning_rate=config.learning_rate, scheduler="constant", warmup_steps=0, seed=config.seed,
        output_dir=str(out), quiet=config.quiet,
    )  # fmt: skip
    if config.guide is not None:
        values["guide"] = config.guide
    if config.device:
        values["device"] = config.device
    values.update(config.train_option)
    values["resume" if resume else "overwrite_output_dir"] = True
    return values


def train_command(config: AdaptConfig, data: Path, out: Path) -> str:
    values = train_values(config, data, out, resume=False)
    values.pop("overwrite_output_dir")
    model = values.pop("model")
    return command("train", model, *_options(values))


def train(config: AdaptConfig, data: Path, out: Path) -> dict[str, Any]:
    """``anglekit train``: the student trained on the mined rows (resumed from its last checkpoint after an interruption)."""
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import last_complete_checkpoint, train

    resume = out.is_dir() and last_complete_checkpoint(out) is not None
    result = train(TrainConfig.from_dict(train_values(config, data, out, resume), source="anglekit adapt"))
    return {"model_dir": str(result.model_dir), "steps": result.steps, "train_seconds": result.train_seconds, "pairs_per_second": result.pairs_per_second,
            "tokenize_seconds": result.tokenize_seconds, "precision": result.precision, "guide_masked": result.guide_masked}  # fmt: skip


def merge_command(config: AdaptConfig, trained: Path, weight: float, out: Path) -> str:
    return command("merge", config.model, trained, "--weight", f"{weight:g}", "--max-length", config.max_length, "--output-dir", out)


def merge(config: AdaptConfig, trained: Path, weight: float, out: Path) -> dict[str, Any]:
    """``anglekit merge START TRAINED --weight W``: the start and the trained model averaged."""
    from anglekit.model.load_settings import LoadSettings
    from anglekit.model.merge import merge_models

    if out.is_dir():  # this stage's own folder, not recorded as done (cut short after its rename): merged again
        shutil.rmtree(out)
    merge_models(config.model, str(trained), [weight], out, LoadSettings(max_length=config.max_length, device=config.device or "cpu"))
    return {"weight": weight, "model_dir": str(out)}


__all__ = ["command", "eval_command", "eval_data", "evaluate", "generate", "merge", "merge_command", "mine", "mine_command", "queries_command",
           "split", "train", "train_command", "train_values"]  # fmt: skip
