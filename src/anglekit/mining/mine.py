"""``mine_hard_negatives``: (anchor, positive) pairs + a corpus -> n-tuples with hard negatives.

The work happens in a work folder (default: ``OUTPUT.mine`` beside the output), each step
resumable after a kill:

1. the candidate pool (:mod:`anglekit.mining.pool`: the corpus file, then the distinct positives
   it lacks, as sentence-transformers adds them; without a corpus, the distinct positives) and the
   distinct anchors are encoded into shards by :func:`anglekit.corpus.encode_corpus` (documents
   and queries: the model's document and query prompts), in constant memory;
2. the candidates of each query shard (the ``range_max + positives + 1`` best pool rows) are found
   with anglekit's search (exact: streamed over the corpus shards; ``hnsw`` / ``int8``: a
   :class:`~anglekit.index.VectorIndex` of them) and saved, one file per query shard;
3. :func:`~anglekit.mining.select.select_negatives` picks the negatives (with a teacher, which
   scores the positives and the negatives, its guard as one more filter:
   :mod:`anglekit.mining.teaching`), the corpus is read once more for their texts, and the output
   (JSON Lines or Parquet), its summary (JSON) and the score histogram (PNG) are written
   atomically: all of them, or none.

The output has the columns ``anchor``, ``positive``, ``negative_1`` .. ``negative_N`` and the
cosines ``positive_score``, ``negative_1_score`` .. ``negative_N_score`` (with a teacher: its
scores, :mod:`anglekit.mining.teacher`): one row for each
distinct (anchor, positive) pair that got N negatives. Texts are matched by content (a 64-bit
BLAKE2b hash of the text): a pool text equal to the anchor or to one of its positives is never
its negative. Every input is checked before anything is created: the corpus exists and is
readable, no output (nor the work folder's files) is an input, and ``num_negatives`` fits the pool.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.atomic import atomic_path, atomic_write, atomic_write_json
from anglekit.mining.checks import OUTPUT_FORMATS, check_paths, check_pool_size
from anglekit.mining.pool import Pool, PoolShards, scan_pool, text_hash, text_hashes
from anglekit.mining.select import FILTERS, Selection, select_negatives
from anglekit.mining.settings import MineSettings, TeacherSettings
from anglekit.mining.teacher import Teacher, TeacherSpec, check_teacher, load_teacher
from anglekit.mining.teaching import GuardedChoice, check_finite, guarded_selection, score_stats, teacher_section, teacher_text
from anglekit.model import DEFAULT_BATCH_SIZE

__all__ = ["OUTPUT_FORMATS", "MineReport", "mine_hard_negatives", "text_hash"]

logger = logging.getLogger(__name__)

QUERY_ROLE = "query"
DOCUMENT_ROLE = "document"
"""The one place where mining names the query/document roles of the model's prompts (anchors are
embedded as queries, the corpus as documents, through ``EncodeRequest(role=...)``); a model without
such a prompt embeds that side with its general prompt, as ``encode_query``/``encode_document`` do."""
_QUERY_BLOCK = 4096


@dataclass(frozen=True)
class MineReport:
    """What :func:`mine_hard_negatives` wrote, and the summary it wrote beside it."""

    output: Path
    summary_path: Path
    histogram_path: Path
    rows: int
    summary: dict[str, Any]

    def text(self) -> str:
        s = self.summary
        counts = ", ".join(f"{k}: {v}" for k, v in s["negatives_per_row"].items())
        pool = (
            f"the {s['positives_added_to_pool']} distinct positives"
            if s["corpus_rows"] == 0
            else f"{s['corpus_rows']} corpus rows + {s['positives_added_to_pool']} positives not in the corpus"
        )
        return (
            f"{self.rows} of {s['pairs']} (anchor, positive) pairs got {s['settings']['num_negatives']} negatives -> {self.output}\n"
            f"candidate pool: {pool}\n"
            f"rows by negatives found: {counts}\n"
            f"model scores: positive mean {s['scores']['positive']['mean']:.4f}, negative mean {s['scores']['negative']['mean']:.4f}; "
            f"skipped candidates: {s['skipped'] or 'none'}\n"
            f"summary {self.summary_path}, histogram {self.histogram_path} ({s['seconds']['total']:.1f} s)"
            + (f"\n{teacher_text(s['teacher'])}" if "teacher" in s else "")
        )


@dataclass
class _Pairs:
    """The pairs grouped by anchor: anchors (distinct, first-seen order), and per kept pair its
    anchor index, positive text and source row."""

    source: str
    anchors: list[str]
    pair_anchor: np.ndarray
    pair_positive: list[str]
    pair_row: list[int]
    read: int
    duplicates: int


def _read_pairs(pairs: Any, columns: dict[str, str] | None) -> _Pairs:
    from anglekit.data.triplets import read_triplets

    data = read_triplets(pairs, columns=columns)
    if data.negative is not None:
        logger.warning("%s: its negative column is ignored; mining makes new negatives", data.source or data.name)
    anchors: dict[str, int] = {}
    seen: set[tuple[int, str]] = set()
    pair_anchor: list[int] = []
    pair_positive: list[str] = []
    rows: list[int] = []
    for row, (anchor, positive) in enumerate(zip(data.anchor, data.positive, strict=True), start=1):
        index = anchors.setdefault(anchor, len(anchors))
        if (index, positive) in seen:
            continue
        seen.add((index, positive))
        pair_anchor.append(index)
        pair_positive.append(positive)
        rows.append(row)
    source = str(data.source or data.name or pairs)
    return _Pairs(source, list(anchors), np.asarray(pair_anchor, dtype=np.int64), pair_positive, rows, len(data.anchor), len(data.anchor) - len(rows))


def _write_jsonl_texts(path: Path, texts: list[str]) -> None:
    """``{"id", "text"}`` lines, rewritten only when the content differs (a rerun resumes its shards)."""
    content = "".join(json.dumps({"id": str(i + 1), "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts))
    if path.is_file() and path.read_text(encoding="utf-8") == content:
        return
    atomic_write(path, lambda handle: handle.write(content))


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _search_exact(queries: np.ndarray, pool: PoolShards, width: int, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of the ``width`` best pool rows per query (rows whose ``first`` is False,
    repeated texts, are left out; -1 pads), streamed shard by shard."""
    import torch

    from anglekit.index.quantize import block_scorer, top_k

    best_s = np.full((len(queries), 0), -np.inf, np.float32)
    best_r = np.zeros((len(queries), 0), np.int64)
    for offset, vectors in pool.blocks():
        unit = _unit(vectors)
        score = block_scorer("none", unit, unit.shape[1], None)
        repeated = torch.from_numpy(~first[offset : offset + len(unit)])

        def masked(q: Any, start: int, stop: int, score: Any = score, repeated: Any = repeated) -> Any:
            return score(q, start, stop).masked_fill(repeated[start:stop], float("-inf"))

        s, r = top_k(queries, len(unit), width, masked)
        r = np.where(np.isfinite(s), r, -1 - offset)
        best_s, best_r = np.concatenate([best_s, s], axis=1), np.concatenate([best_r, r + offset], axis=1)
        if best_s.shape[1] > width:
            order = np.lexsort((best_r, -best_s), axis=1)[:, :width]
            best_s, best_r = np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_r, order, axis=1)
    order = np.lexsort((np.where(best_r >= 0, best_r, np.iinfo(np.int64).max), -best_s), axis=1)
    return np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_r, order, axis=1)


def _build_index(pool: PoolShards, kind: str, first: np.ndarray) -> Any:
    """A :class:`~anglekit.index.VectorIndex` (HNSW, or exact over int8 codes) of the pool vectors, ids = rows."""
    from anglekit.index.store import IndexSettings, VectorIndex

    settings = IndexSettings(kind="hnsw") if kind == "hnsw" else IndexSettings(kind="exact", quantize="int8")
    info = {"name": str(pool.manifest.get("model")), "fingerprint": pool.manifest.get("model_fingerprint"), "dim": pool.dim}
    index = VectorIndex(info, settings)
    index._model_checked = True
    for offset, vectors in pool.blocks():
        rows = np.nonzero(first[offset : offset + len(vectors)])[0]
        index.add_vectors([str(offset + i) for i in rows], vectors[rows])
    return index


def _search_index(index: Any, queries: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    ids, scores = index.search_vectors(queries, width)
    rows = np.full((len(queries), width), -1, np.int64)
    out = np.full((len(queries), width), -np.inf, np.float32)
    for q, row_ids in enumerate(ids):
        rows[q, : len(row_ids)] = [int(i) for i in row_ids]
        out[q, : len(row_ids)] = scores[q, : len(row_ids)]
    return out, rows


def _candidates(work: Path, queries: Any, pool: PoolShards, settings: MineSettings, width: int, first: np.ndarray,
                say: Callable[[str], None]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The candidates of every query among the first rows of each pool text, one saved file per
    query shard (kept on a rerun of the same search)."""
    folder = work / "candidates"
    key = {"index": settings.index, "width": width, "pool": pool.key(), "model": pool.manifest.get("model_fingerprint"),
           "queries": queries.manifest.get("input")}  # fmt: skip
    manifest = folder / "candidates.json"
    if manifest.is_file():
        try:
            same = json.loads(manifest.read_text(encoding="utf-8")) == json.loads(json.dumps(key, default=str))
        except (OSError, ValueError):
            same = False
        if not same:
            for old in folder.glob("cand-*.npz"):
                old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(manifest, key)
    index = None
    all_s, all_r = [], []
    done = 0
    for number, (_, vectors) in enumerate(queries):
        path = folder / f"cand-{number:06d}.npz"
        if path.is_file():
            try:
                with np.load(path) as saved:
                    s, r = saved["scores"], saved["rows"]
                if s.shape == (len(vectors), width):
                    all_s.append(s)
                    all_r.append(r)
                    done += 1
                    continue
            except (OSError, ValueError, KeyError):
                pass
        unit = _unit(np.asarray(vectors, dtype=np.float32))
        if settings.index == "exact":
            s, r = _search_exact(unit, pool, width, first)
        else:
            index = index if index is not None else _build_index(pool, settings.index, first)
            s, r = _search_index(index, unit, width)
        s = np.pad(s, ((0, 0), (0, width - s.shape[1])), constant_values=-np.inf)
        r = np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=-1)
        atomic_write(path, lambda handle, s=s, r=r: np.savez(handle, scores=s, rows=r), binary=True)
        all_s.append(s)
        all_r.append(r)
    if done:
        say(f"{work}: candidates of {done} query shard(s) were already found; reused")
    return np.concatenate(all_s), np.concatenate(all_r)


def histogram(path: Path, positive: np.ndarray, negative: np.ndarray, title: str, xlabel: str = "cosine to the anchor") -> None:
    """A PNG of the positive and negative score histograms, written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    bins = np.linspace(min(positive.min(), negative.min()), max(positive.max(), negative.max()), 51)
    axes.hist(positive, bins=bins, alpha=0.6, label=f"positive ({len(positive)})")
    axes.hist(negative, bins=bins, alpha=0.6, label=f"negative ({len(negative)})")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("count")
    axes.set_title(title)
    axes.legend(loc="upper left")
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    plt.close(figure)


def write_output(path: Path, columns: dict[str, list[Any]]) -> None:
    if OUTPUT_FORMATS[path.suffix.lower()] == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_path(path) as tmp:
            pq.write_table(pa.table(columns), tmp)
        return
    names = list(columns)

    def write(handle: Any) -> None:
        for values in zip(*columns.values(), strict=True):
            handle.write(json.dumps(dict(zip(names, values, strict=True)), ensure_ascii=False) + "\n")

    atomic_write(path, write)


def _encode(embedder: Any, work: Path, pool: Pool, queries_file: Path, shard_size: int, batch_size: int, show_progress: bool,
            say: Callable[[str], None]) -> tuple[PoolShards, Any]:  # fmt: skip
    """The pool (documents: the corpus file, then the positives it lacks) and the queries encoded
    into shards under ``work`` (resumed on a rerun)."""
    from anglekit.corpus.encode import EncodeRequest, encode_corpus
    from anglekit.corpus.shards import open_shards

    jobs = []
    if pool.path is not None:
        jobs.append((0, work / "corpus", pool.path, DOCUMENT_ROLE, pool.text_column, pool.id_column))
    if pool.added:
        _write_jsonl_texts(work / "positives.jsonl", pool.added)
        jobs.append((pool.file_rows, work / "positives", work / "positives.jsonl", DOCUMENT_ROLE, None, None))
    jobs.append((-1, work / "queries", queries_file, QUERY_ROLE, None, None))
    parts = []
    for start, folder, source, role, text, ident in jobs:
        request = EncodeRequest(source, folder, text_column=text, id_column=ident, shard_size=shard_size, batch_size=batch_size, normalize=True,
                                role=embedder.config.role_if_present(role), show_progress=show_progress)  # fmt: skip
        try:
            report = encode_corpus(embedder, request, say=say)
        except ConfigError as exc:
            if "holds the shards of another encode" not in str(exc):
                raise
            say(
                f"{folder}: held the shards of another model, corpus or pairs (it differs in {str(exc).split('differs in: ')[-1].split(')')[0]}); encoding again"
            )
            shutil.rmtree(folder)
            report = encode_corpus(embedder, request, say=say)
        if report.reused:
            say(f"{folder}: {report.reused} of {report.shards} shard(s) were already encoded; reused")
        parts.append((start, open_shards(folder, hashes=False)))
    return PoolShards(parts[:-1]), parts[-1][1]


def _positive_sets(pairs: _Pairs, positive_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per anchor: its positives' text hashes ``[q, p]``, their mask, and its lowest positive score."""
    n_queries = len(pairs.anchors)
    positives_of: list[list[int]] = [[] for _ in range(n_queries)]
    for pair, anchor in enumerate(pairs.pair_anchor):
        positives_of[int(anchor)].append(pair)
    width = max(len(p) for p in positives_of)
    hashes = text_hashes(pairs.pair_positive)
    matrix = np.zeros((n_queries, width), np.uint64)
    mask = np.zeros((n_queries, width), bool)
    for q, pairs_of_q in enumerate(positives_of):
        matrix[q, : len(pairs_of_q)] = hashes[pairs_of_q]
        mask[q, : len(pairs_of_q)] = True
    lowest = np.full(n_queries, np.inf, np.float32)
    np.minimum.at(lowest, pairs.pair_anchor, positive_scores.astype(np.float32))
    return matrix, mask, lowest


def _select_all(rows: np.ndarray, scores: np.ndarray, pool: Pool, anchors: list[str], positives: tuple[np.ndarray, np.ndarray, np.ndarray],
                settings: MineSettings, dropped: np.ndarray | None = None, guarded: bool = False) -> Selection:  # fmt: skip
    """:func:`select_negatives` over every query, in blocks (``dropped``: candidates a teacher guard removed)."""
    matrix, mask, lowest = positives
    n_queries = len(rows)
    cand_hashes = np.where(rows >= 0, pool.hashes[np.clip(rows, 0, None)], np.uint64(0))
    anchor_hashes = text_hashes(anchors)
    rng = np.random.default_rng(settings.seed)
    out = Selection(np.full((n_queries, settings.num_negatives), -1, np.int64), np.full((n_queries, settings.num_negatives), np.nan, np.float32), {},
                    np.full((n_queries, settings.num_negatives), -1, np.int64), np.zeros(rows.shape, bool))  # fmt: skip
    assert out.columns is not None and out.considered is not None
    for lo in range(0, n_queries, _QUERY_BLOCK):
        hi = min(n_queries, lo + _QUERY_BLOCK)
        chosen = select_negatives(rows[lo:hi], scores[lo:hi], cand_hashes[lo:hi], matrix[lo:hi], mask[lo:hi], lowest[lo:hi], settings, matrix.shape[1], rng,
                                  anchor_hashes=anchor_hashes[lo:hi], dropped=None if dropped is None else dropped[lo:hi], guarded=guarded)  # fmt: skip
        out.rows[lo:hi], out.scores[lo:hi], out.columns[lo:hi], out.considered[lo:hi] = chosen.rows, chosen.scores, chosen.columns, chosen.considered
        for name, value in chosen.skipped.items():
            out.skipped[name] = out.skipped.get(name, 0) + value
    return out


def _teach(teacher: Teacher | None, settings: TeacherSettings, data: _Pairs, pool: Pool, candidates: tuple[np.ndarray, np.ndarray],
           positives: tuple[np.ndarray, np.ndarray, np.ndarray], mine: MineSettings,
           say: Callable[[str], None]) -> tuple[Selection, GuardedChoice | None, np.ndarray | None]:  # fmt: skip
    """The selection, with the teacher's scores (of each negative, and of each pair's positive) and its guard, if there is a teacher."""
    scores, rows = candidates

    def select(dropped: np.ndarray | None) -> Selection:
        return _select_all(rows, scores, pool, data.anchors, positives, mine, dropped, settings.guarded)

    if teacher is None:
        return select(None), None, None
    positive = teacher.score([data.anchors[int(a)] for a in data.pair_anchor], data.pair_positive)
    check_finite(positive, lambda i: (data.source, data.pair_row[i], "positive", data.pair_positive[i]), teacher)
    lowest = np.full(len(data.anchors), np.inf, np.float32)
    np.minimum.at(lowest, data.pair_anchor, positive)
    first_pair = np.zeros(len(data.anchors), np.int64)
    first_pair[data.pair_anchor[::-1]] = np.arange(len(data.pair_anchor))[::-1]
    choice = guarded_selection(teacher, settings, select, rows, data.anchors, lowest, pool.texts_of,
                               lambda q: (data.source, data.pair_row[int(first_pair[q])]), say)  # fmt: skip
    return choice.selection, choice, positive


def _table(pairs: _Pairs, keep: np.ndarray, kept_rows: np.ndarray, kept_scores: np.ndarray, positive_scores: np.ndarray, pool: Pool) -> dict[str, list[Any]]:
    """The output's columns: anchor, positive, negative_1..N, positive_score, negative_1..N_score."""
    count = kept_rows.shape[1]
    texts = pool.texts_of(kept_rows)
    table: dict[str, list[Any]] = {
        "anchor": [pairs.anchors[int(pairs.pair_anchor[i])] for i in keep],
        "positive": [pairs.pair_positive[int(i)] for i in keep],
    }
    for j in range(count):
        table[f"negative_{j + 1}"] = [texts[int(r)] for r in kept_rows[:, j]]
    for i, (anchor, positive) in enumerate(zip(table["anchor"], table["positive"], strict=True)):
        same = [j + 1 for j in range(count) if table[f"negative_{j + 1}"][i] in (positive, anchor)]
        if same:  # a hash collision: never write a negative equal to its positive or anchor
            raise DataError(f"negative_{same[0]} equals the positive or the anchor {table[f'negative_{same[0]}'][i][:80]!r}", source=pairs.source,
                            row=pairs.pair_row[int(keep[i])])  # fmt: skip
    table["positive_score"] = [float(s) for s in positive_scores[keep]]
    for j in range(count):
        table[f"negative_{j + 1}_score"] = [float(s) for s in kept_scores[:, j]]
    return table


def _complete_rows(neg_rows: np.ndarray, data: _Pairs, count: int, skipped: dict[str, int]) -> tuple[np.ndarray, dict[str, int]]:
    """The pairs whose anchor got ``count`` negatives, and how many pairs got how many (the counts
    that occur); a DataError when none did."""
    found = (neg_rows >= 0).sum(axis=1)[data.pair_anchor]
    values, numbers = np.unique(found, return_counts=True)
    per_row = {str(int(k)): int(v) for k, v in zip(values, numbers, strict=True)}
    per_row.setdefault(str(count), 0)
    keep = np.nonzero(found == count)[0]
    if not len(keep):
        raise DataError(
            f"no (anchor, positive) pair got {count} negatives (negatives found per pair: min {int(found.min())}, median {float(np.median(found)):g}, "
            f"max {int(found.max())}; skipped candidates: {skipped}); the range or the margins leave too few candidates: widen range_max, lower "
            "range_min, loosen the margins or max_score, or ask fewer negatives",
            source=data.source,
        )
    return keep, per_row


def _search(work: Path, data: _Pairs, pool: Pool, shards: tuple[PoolShards, Any], settings: MineSettings, guarded: bool,
            say: Callable[[str], None]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray, int]:  # fmt: skip
    """Positive scores, the positive sets, and the candidates (scores, rows) of every anchor, with their width."""
    pool_shards, query_shards = shards
    query_vectors = _unit(query_shards.load()[1])
    positive_rows = pool.rows_of(text_hashes(data.pair_positive))  # every positive is in the pool
    positive_scores = np.einsum("ij,ij->i", query_vectors[data.pair_anchor], _unit(pool_shards.gather(positive_rows)))
    positives = _positive_sets(data, positive_scores)
    max_positives = positives[0].shape[1]
    width = min(
        pool.distinct, settings.window(max_positives, guarded=guarded) + max_positives + 1
    )  # room for the positives and the anchor, as sentence-transformers
    scores, rows = _candidates(work, query_shards, pool_shards, settings, width, pool.first(), say)
    return positive_scores, positives, scores, rows, width


def _summary(data: _Pairs, pool: Pool, paths: Any, settings: MineSettings, width: int, keep: np.ndarray, per_row: dict[str, int],
             selection: Selection, positive_scores: np.ndarray, embedder: Any) -> dict[str, Any]:  # fmt: skip
    """The summary of a mine (the teacher's section is added by the caller)."""
    out = paths.output
    kept_scores = selection.scores[data.pair_anchor[keep]]
    skipped = selection.skipped
    return {
        "output": str(out), "format": OUTPUT_FORMATS[out.suffix.lower()], "model": embedder.source, "model_fingerprint": embedder.fingerprint(),
        "pairs_source": data.source, "rows_read": data.read, "duplicate_pairs": data.duplicates, "pairs": len(data.pair_positive),
        "anchors": len(data.anchors), "corpus": str(paths.corpus) if paths.corpus is not None else "the distinct positives",
        "corpus_rows": pool.file_rows, "positives_added_to_pool": len(pool.added), "pool_rows": len(pool.hashes),
        "corpus_repeated_texts": len(pool.hashes) - pool.distinct, "candidates_per_query": width,
        "rows_written": int(len(keep)), "negatives_per_row": per_row, "skipped": {name: skipped[name] for name in FILTERS if skipped.get(name)},
        "scores": {"positive": score_stats(positive_scores[keep]), "negative": score_stats(kept_scores.reshape(-1)),
                   "difference": score_stats((positive_scores[keep][:, None] - kept_scores).reshape(-1))},
        "score_columns": "the model's cosines", "settings": asdict(settings), "work_dir": str(paths.work),
    }  # fmt: skip


def _check_teacher(teacher: Any, settings: TeacherSettings) -> TeacherSpec | Teacher | None:
    """The teacher checked before anything is created (a loaded :class:`Teacher` passes as is)."""
    if teacher is None:
        given = settings.given()
        if given:
            raise ConfigError(f"--{next(iter(given)).replace('_', '-')} is a setting of the teacher: give --teacher MODEL, or leave it out")
        return None
    if isinstance(teacher, Teacher):
        return teacher
    return check_teacher(os.fspath(teacher), settings)


def mine_hard_negatives(
    model: Any,
    pairs: Any,
    output: str | os.PathLike[str],
    *,
    corpus: str | os.PathLike[str] | None = None,
    settings: MineSettings | None = None,
    columns: dict[str, str] | None = None,
    corpus_text_column: str | None = None,
    corpus_id_column: str | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    shard_size: int = 10_000,
    model_kwargs: dict[str, Any] | None = None,
    teacher: str | os.PathLike[str] | Teacher | None = None,
    teacher_settings: TeacherSettings | None = None,
    show_progress: bool = False,
    say: Callable[[str], None] | None = None,
) -> MineReport:
    """Mine hard negatives for the (anchor, positive) ``pairs`` (a file or anything
    :func:`~anglekit.data.triplets.read_triplets` reads; ``columns`` maps anchor/positive to its
    names) from ``corpus`` (a .txt/.jsonl/.csv/.tsv/.parquet corpus, the positives it lacks added
    to it; default: the distinct positives) with ``model`` (an Embedder or a name loaded with
    ``model_kwargs``), and write ``output`` (.jsonl or .parquet) with its summary and histogram
    (see the module doc). With a ``teacher`` (:mod:`anglekit.mining.teacher`, loaded on the
    model's device) the ``*_score`` columns hold its scores, and ``teacher_settings`` may guard
    against false negatives with them (:mod:`anglekit.mining.guard`). Bad input is refused before
    anything is created."""
    from anglekit.model.embedder import Embedder

    started = time.perf_counter()
    say = say or logger.info
    settings, teacher_settings = settings or MineSettings(), teacher_settings or TeacherSettings()
    if corpus is None and (corpus_text_column or corpus_id_column):
        raise ConfigError("--corpus-column and --corpus-id-column name columns of --corpus; give --corpus or leave them out")
    paths = check_paths(output, work_dir, corpus, pairs)
    spec = _check_teacher(teacher, teacher_settings)
    data = _read_pairs(pairs, columns)
    pool = scan_pool(paths.corpus, corpus_text_column, corpus_id_column, data.pair_positive)
    check_pool_size(pool, data.anchors, data.pair_anchor, data.pair_positive, settings.num_negatives, say)
    device = (model_kwargs or {}).get("device") or (str(model.device) if isinstance(model, Embedder) else None)
    loaded = spec if not isinstance(spec, TeacherSpec) else load_teacher(spec, teacher_settings, device)  # loaded before anything is created
    paths.work.mkdir(parents=True, exist_ok=True)
    _write_jsonl_texts(paths.work / "queries.jsonl", data.anchors)
    timings: dict[str, float] = {"read": time.perf_counter() - started}

    t0 = time.perf_counter()
    embedder = model if isinstance(model, Embedder) else Embedder.from_pretrained(os.fspath(model), **(model_kwargs or {}))
    shards = _encode(embedder, paths.work, pool, paths.work / "queries.jsonl", shard_size, batch_size, show_progress, say)
    timings["encode"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    positive_scores, positives, scores, rows, width = _search(paths.work, data, pool, shards, settings, teacher_settings.guarded, say)
    timings["search"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    selection, choice, teacher_positive = _teach(loaded, teacher_settings, data, pool, (scores, rows), positives, settings, say)
    keep, per_row = _complete_rows(selection.rows, data, settings.num_negatives, selection.skipped)
    kept_rows, kept_scores = selection.rows[data.pair_anchor[keep]], selection.scores[data.pair_anchor[keep]]
    written = (positive_scores, kept_scores) if choice is None else (teacher_positive, choice.scores[data.pair_anchor[keep]])
    table = _table(data, keep, kept_rows, written[1], written[0], pool)
    timings["select"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - started

    summary = _summary(data, pool, paths, settings, width, keep, per_row, selection, positive_scores, embedder)
    xlabel = "cosine to the anchor"
    if loaded is not None and choice is not None and teacher_positive is not None:
        summary["teacher"] = teacher_section(loaded, teacher_settings, teacher_positive[keep], written[1], choice.dropped)
        summary["teacher"]["mining_model_max_length"] = getattr(getattr(embedder, "config", None), "max_length", None)
        summary["score_columns"] = f"the teacher's {loaded.scale}s"
        xlabel = f"teacher {loaded.scale} ({loaded.spec.name})"
    summary["seconds"] = {k: round(v, 3) for k, v in timings.items()}
    title = f"{paths.output.name}: {len(keep)} rows x {settings.num_negatives} negatives"
    histogram(paths.histogram, np.asarray(table["positive_score"]), written[1].reshape(-1), title, xlabel)
    write_output(paths.output, table)
    atomic_write_json(paths.summary, summary)  # last: a summary means the output beside it is complete
    return MineReport(paths.output, paths.summary, paths.histogram, int(len(keep)), summary)
