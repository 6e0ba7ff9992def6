"""``mine_hard_negatives``: (anchor, positive) pairs + a corpus -> n-tuples with hard negatives.

The work happens in a work folder (default: ``OUTPUT.mine`` beside the output), each step
resumable after a kill:

1. the corpus (default: the distinct positives of the pairs) and the distinct anchors are encoded
   into shards by :func:`anglekit.corpus.encode_corpus` (documents and queries: the model's
   document and query prompts), in constant memory;
2. the candidates of each query shard (the ``range_max + positives`` best corpus rows) are found
   with anglekit's search (exact: streamed over the corpus shards; ``hnsw`` / ``int8``: a
   :class:`~anglekit.index.VectorIndex` of them) and saved, one file per query shard;
3. :func:`~anglekit.mining.select.select_negatives` picks the negatives, the corpus is read once
   more for their texts, and the output (JSON Lines or Parquet), its summary (JSON) and the
   score histogram (PNG) are written atomically: all of them, or none.

The output has the columns ``anchor``, ``positive``, ``negative_1`` .. ``negative_N`` and the
cosines ``positive_score``, ``negative_1_score`` .. ``negative_N_score``: one row for each
distinct (anchor, positive) pair that got N negatives. Texts are matched by content (a 64-bit
BLAKE2b hash of the text): a corpus text equal to one of the query's positives is never its
negative.
"""

from __future__ import annotations

import hashlib
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
from anglekit.mining.select import FILTERS, select_negatives
from anglekit.mining.settings import MineSettings
from anglekit.model import DEFAULT_BATCH_SIZE

__all__ = ["OUTPUT_FORMATS", "MineReport", "mine_hard_negatives", "text_hash"]

logger = logging.getLogger(__name__)

OUTPUT_FORMATS = {".jsonl": "jsonl", ".parquet": "parquet"}
QUERY_ROLE = "query"
DOCUMENT_ROLE = "document"
"""The one place where mining names the query/document roles of the model's prompts (anchors are
embedded as queries, the corpus as documents, through ``EncodeRequest(role=...)``); a model without
such a prompt embeds that side with its general prompt, as ``encode_query``/``encode_document`` do."""
_QUERY_BLOCK = 4096


def text_hash(text: str) -> int:
    """The 64-bit BLAKE2b hash of a text (UTF-8) that mining matches texts by."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _hashes(texts: list[str]) -> np.ndarray:
    return np.fromiter((text_hash(t) for t in texts), dtype=np.uint64, count=len(texts))


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
        return (
            f"{self.rows} of {s['pairs']} (anchor, positive) pairs got {s['settings']['num_negatives']} negatives -> {self.output}\n"
            f"rows by negatives found: {counts}\n"
            f"scores: positive mean {s['scores']['positive']['mean']:.4f}, negative mean {s['scores']['negative']['mean']:.4f}; "
            f"skipped candidates: {s['skipped'] or 'none'}\n"
            f"summary {self.summary_path}, histogram {self.histogram_path} ({s['seconds']['total']:.1f} s)"
        )


def _side_paths(output: Path) -> tuple[Path, Path]:
    stem = output.with_suffix("")
    return stem.with_name(stem.name + ".summary.json"), stem.with_name(stem.name + ".scores.png")


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


@dataclass
class _Corpus:
    """The corpus file: its size, the text hash of each row, and the row of each hash."""

    path: Path
    text_column: str | None
    id_column: str | None
    hashes: np.ndarray
    order: np.ndarray

    def rows_of(self, hashes: np.ndarray) -> np.ndarray:
        """The first corpus row holding each hash (-1: not in the corpus)."""
        sorted_hashes = self.hashes[self.order]
        at = np.clip(np.searchsorted(sorted_hashes, hashes), 0, max(0, len(sorted_hashes) - 1))
        found = (sorted_hashes[at] == hashes) if len(sorted_hashes) else np.zeros(len(hashes), bool)
        return np.where(found, self.order[at] if len(sorted_hashes) else -1, -1)

    @property
    def distinct(self) -> int:
        """How many distinct texts the corpus holds."""
        return int(len(np.unique(self.hashes)))

    def first(self) -> np.ndarray:
        """True for the first row of each distinct text (mining searches those, as a corpus without repeats)."""
        out = np.zeros(len(self.hashes), bool)
        sorted_hashes = self.hashes[self.order]
        starts = np.ones(len(sorted_hashes), bool)
        starts[1:] = sorted_hashes[1:] != sorted_hashes[:-1]
        out[self.order[starts]] = True
        return out

    def texts_of(self, rows: np.ndarray) -> dict[int, str]:
        """The texts of ``rows`` (one more pass over the corpus)."""
        from anglekit.corpus.reader import iter_corpus

        wanted = np.unique(rows[rows >= 0])
        out: dict[int, str] = {}
        for chunk in iter_corpus(self.path, text_column=self.text_column, id_column=self.id_column):
            lo, hi = np.searchsorted(wanted, [chunk.start, chunk.start + len(chunk)])
            for row in wanted[lo:hi]:
                out[int(row)] = chunk.texts[int(row) - chunk.start]
        return out


def _scan_corpus(path: Path, text_column: str | None, id_column: str | None) -> _Corpus:
    """Hash every corpus text; duplicate ids are a DataError naming the id and its records."""
    from anglekit.corpus.reader import iter_corpus

    parts: list[np.ndarray] = []
    id_parts: list[np.ndarray] = []
    for chunk in iter_corpus(path, text_column=text_column, id_column=id_column):
        parts.append(_hashes(chunk.texts))
        id_parts.append(_hashes(chunk.ids))
    hashes = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    if not len(hashes):
        raise DataError("the corpus has no records", source=str(path))
    ids = np.concatenate(id_parts)
    order = np.argsort(ids, kind="stable")
    repeated = np.nonzero(ids[order][1:] == ids[order][:-1])[0]
    if len(repeated):
        first, second = sorted((int(order[repeated[0]]), int(order[repeated[0] + 1])))
        ident = next(c.ids[first - c.start] for c in iter_corpus(path, text_column=text_column, id_column=id_column) if c.start <= first < c.start + len(c))
        raise DataError(f"duplicate id {ident!r} (records {first + 1} and {second + 1}); ids must be unique", source=str(path))
    return _Corpus(path, text_column, id_column, hashes, np.argsort(hashes, kind="stable"))


def _gather(shards: Any, rows: np.ndarray) -> np.ndarray:
    """The vectors of corpus ``rows`` (any order) from the shards, one shard in memory at a time."""
    out = np.zeros((len(rows), shards.dim), np.float32)
    size = int(shards.manifest["shard_size"])
    for index, (_, vectors) in enumerate(shards):
        mask = (rows // size) == index
        if mask.any():
            out[mask] = vectors[rows[mask] - index * size]
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _search_exact(queries: np.ndarray, shards: Any, width: int, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of the ``width`` best corpus rows per query (rows whose ``first`` is False,
    repeated texts, are left out; -1 pads), streamed shard by shard."""
    import torch

    from anglekit.index.quantize import block_scorer, top_k

    size = int(shards.manifest["shard_size"])
    best_s = np.full((len(queries), 0), -np.inf, np.float32)
    best_r = np.zeros((len(queries), 0), np.int64)
    for index, (_, vectors) in enumerate(shards):
        unit = _unit(np.asarray(vectors, dtype=np.float32))
        score = block_scorer("none", unit, unit.shape[1], None)
        repeated = torch.from_numpy(~first[index * size : index * size + len(unit)])

        def masked(q: Any, start: int, stop: int, score: Any = score, repeated: Any = repeated) -> Any:
            return score(q, start, stop).masked_fill(repeated[start:stop], float("-inf"))

        s, r = top_k(queries, len(unit), width, masked)
        r = np.where(np.isfinite(s), r, -1 - index * size)
        best_s, best_r = np.concatenate([best_s, s], axis=1), np.concatenate([best_r, r + index * size], axis=1)
        if best_s.shape[1] > width:
            order = np.lexsort((best_r, -best_s), axis=1)[:, :width]
            best_s, best_r = np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_r, order, axis=1)
    order = np.lexsort((np.where(best_r >= 0, best_r, np.iinfo(np.int64).max), -best_s), axis=1)
    return np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_r, order, axis=1)


def _build_index(shards: Any, kind: str, first: np.ndarray) -> Any:
    """A :class:`~anglekit.index.VectorIndex` (HNSW, or exact over int8 codes) of the corpus vectors, ids = rows."""
    from anglekit.index.store import IndexSettings, VectorIndex

    settings = IndexSettings(kind="hnsw") if kind == "hnsw" else IndexSettings(kind="exact", quantize="int8")
    info = {"name": str(shards.manifest.get("model")), "fingerprint": shards.manifest.get("model_fingerprint"), "dim": shards.dim}
    index = VectorIndex(info, settings)
    index._model_checked = True
    size = int(shards.manifest["shard_size"])
    for shard, (ids, vectors) in enumerate(shards):
        rows = np.nonzero(first[shard * size : shard * size + len(ids)])[0]
        index.add_vectors([str(shard * size + i) for i in rows], np.asarray(vectors)[rows])
    return index


def _search_index(index: Any, queries: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    ids, scores = index.search_vectors(queries, width)
    rows = np.full((len(queries), width), -1, np.int64)
    out = np.full((len(queries), width), -np.inf, np.float32)
    for q, row_ids in enumerate(ids):
        rows[q, : len(row_ids)] = [int(i) for i in row_ids]
        out[q, : len(row_ids)] = scores[q, : len(row_ids)]
    return out, rows


def _candidates(work: Path, queries: Any, corpus_shards: Any, settings: MineSettings, width: int, first: np.ndarray,
                say: Callable[[str], None]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The candidates of every query among the first rows of each corpus text, one saved file per
    query shard (kept on a rerun of the same search)."""
    folder = work / "candidates"
    key = {"index": settings.index, "width": width, "corpus": corpus_shards.manifest.get("input"), "rows": corpus_shards.rows,
           "model": corpus_shards.manifest.get("model_fingerprint"), "queries": queries.manifest.get("input")}  # fmt: skip
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
            s, r = _search_exact(unit, corpus_shards, width, first)
        else:
            index = index if index is not None else _build_index(corpus_shards, settings.index, first)
            s, r = _search_index(index, unit, width)
        s = np.pad(s, ((0, 0), (0, width - s.shape[1])), constant_values=-np.inf)
        r = np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=-1)
        atomic_write(path, lambda handle, s=s, r=r: np.savez(handle, scores=s, rows=r), binary=True)
        all_s.append(s)
        all_r.append(r)
    if done:
        say(f"{work}: candidates of {done} query shard(s) were already found; reused")
    return np.concatenate(all_s), np.concatenate(all_r)


def _stats(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {"count": 0}
    q25, q50, q75 = np.quantile(values, [0.25, 0.5, 0.75])
    return {"count": int(len(values)), "mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "25%": float(q25), "50%": float(q50), "75%": float(q75), "max": float(values.max())}  # fmt: skip


def _histogram(path: Path, positive: np.ndarray, negative: np.ndarray, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    bins = np.linspace(min(positive.min(), negative.min()), max(positive.max(), negative.max()), 51)
    axes.hist(positive, bins=bins, alpha=0.6, label=f"positive ({len(positive)})")
    axes.hist(negative, bins=bins, alpha=0.6, label=f"negative ({len(negative)})")
    axes.set_xlabel("cosine to the anchor")
    axes.set_ylabel("count")
    axes.set_title(title)
    axes.legend(loc="upper left")
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    plt.close(figure)


def _write_output(path: Path, columns: dict[str, list[Any]]) -> None:
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


def _check_positives(pairs: _Pairs, scanned: _Corpus, corpus_path: Path) -> np.ndarray:
    """The corpus row of each pair's positive; a DataError naming the first that is missing."""
    positive_rows = scanned.rows_of(_hashes(pairs.pair_positive))
    missing = np.nonzero(positive_rows < 0)[0]
    if len(missing):
        first = int(missing[0])
        raise DataError(
            f"positive {pairs.pair_positive[first][:80]!r} is not in the corpus {corpus_path} ({len(missing)} of {len(positive_rows)} positives are not); "
            "give a corpus that holds every positive, or leave --corpus out to mine among the positives",
            source=pairs.source,
            row=pairs.pair_row[first],
            field="positive",
        )
    return positive_rows


def _encode(embedder: Any, work: Path, corpus: tuple[Path, str | None, str | None], queries_file: Path, shard_size: int, batch_size: int,
            show_progress: bool, say: Callable[[str], None]) -> tuple[Any, Any]:  # fmt: skip
    """The corpus (documents) and queries encoded into shards under ``work`` (resumed on a rerun)."""
    from anglekit.corpus.encode import EncodeRequest, encode_corpus
    from anglekit.corpus.shards import open_shards

    corpus_path, text_column, id_column = corpus
    for folder, source, role, text, ident in (
        (work / "corpus", corpus_path, DOCUMENT_ROLE, text_column, id_column),
        (work / "queries", queries_file, QUERY_ROLE, None, None),
    ):
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
    return open_shards(work / "corpus", hashes=False), open_shards(work / "queries", hashes=False)


def _positive_sets(pairs: _Pairs, positive_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per anchor: its positives' text hashes ``[q, p]``, their mask, and its lowest positive score."""
    n_queries = len(pairs.anchors)
    positives_of: list[list[int]] = [[] for _ in range(n_queries)]
    for pair, anchor in enumerate(pairs.pair_anchor):
        positives_of[int(anchor)].append(pair)
    width = max(len(p) for p in positives_of)
    hashes = _hashes(pairs.pair_positive)
    matrix = np.zeros((n_queries, width), np.uint64)
    mask = np.zeros((n_queries, width), bool)
    for q, pairs_of_q in enumerate(positives_of):
        matrix[q, : len(pairs_of_q)] = hashes[pairs_of_q]
        mask[q, : len(pairs_of_q)] = True
    lowest = np.full(n_queries, np.inf, np.float32)
    np.minimum.at(lowest, pairs.pair_anchor, positive_scores.astype(np.float32))
    return matrix, mask, lowest


def _select_all(rows: np.ndarray, scores: np.ndarray, scanned: _Corpus, positives: tuple[np.ndarray, np.ndarray, np.ndarray],
                settings: MineSettings) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:  # fmt: skip
    """:func:`select_negatives` over every query, in blocks; (rows, scores, skipped counts)."""
    matrix, mask, lowest = positives
    n_queries = len(rows)
    cand_hashes = np.where(rows >= 0, scanned.hashes[np.clip(rows, 0, None)], np.uint64(0))
    rng = np.random.default_rng(settings.seed)
    neg_rows = np.full((n_queries, settings.num_negatives), -1, np.int64)
    neg_scores = np.full((n_queries, settings.num_negatives), np.nan, np.float32)
    skipped: dict[str, int] = {}
    for lo in range(0, n_queries, _QUERY_BLOCK):
        hi = min(n_queries, lo + _QUERY_BLOCK)
        chosen = select_negatives(rows[lo:hi], scores[lo:hi], cand_hashes[lo:hi], matrix[lo:hi], mask[lo:hi], lowest[lo:hi], settings, matrix.shape[1], rng)
        neg_rows[lo:hi], neg_scores[lo:hi] = chosen.rows, chosen.scores
        for name, value in chosen.skipped.items():
            skipped[name] = skipped.get(name, 0) + value
    return neg_rows, neg_scores, skipped


def _table(
    pairs: _Pairs, keep: np.ndarray, kept_rows: np.ndarray, kept_scores: np.ndarray, positive_scores: np.ndarray, scanned: _Corpus
) -> dict[str, list[Any]]:
    """The output's columns: anchor, positive, negative_1..N, positive_score, negative_1..N_score."""
    count = kept_rows.shape[1]
    texts = scanned.texts_of(kept_rows)
    table: dict[str, list[Any]] = {
        "anchor": [pairs.anchors[int(pairs.pair_anchor[i])] for i in keep],
        "positive": [pairs.pair_positive[int(i)] for i in keep],
    }
    for j in range(count):
        table[f"negative_{j + 1}"] = [texts[int(r)] for r in kept_rows[:, j]]
    for i, positive in enumerate(table["positive"]):
        same = [j + 1 for j in range(count) if table[f"negative_{j + 1}"][i] == positive]
        if same:  # a hash collision: never write a negative equal to its positive
            raise DataError(f"negative_{same[0]} equals the positive {positive[:80]!r}", source=pairs.source, row=pairs.pair_row[int(keep[i])])
    table["positive_score"] = [float(s) for s in positive_scores[keep]]
    for j in range(count):
        table[f"negative_{j + 1}_score"] = [float(s) for s in kept_scores[:, j]]
    return table


def _corpus_path(corpus: str | os.PathLike[str] | None, data: _Pairs, work: Path, outputs: tuple[Path, ...]) -> Path:
    """The corpus file: the one given, else the distinct positives written into ``work``."""
    if corpus is None:
        path = work / "positives.jsonl"
        _write_jsonl_texts(path, list(dict.fromkeys(data.pair_positive)))
        return path
    path = Path(os.fspath(corpus)).expanduser()
    if any(path.resolve() == o.resolve() for o in outputs):
        raise ConfigError(f"--corpus {path} is one of the files the mine writes ({', '.join(map(str, outputs))})")
    return path


def _complete_rows(neg_rows: np.ndarray, data: _Pairs, count: int, skipped: dict[str, int]) -> tuple[np.ndarray, dict[str, int]]:
    """The pairs whose anchor got ``count`` negatives, and how many pairs got how many; a DataError when none did."""
    found = (neg_rows >= 0).sum(axis=1)[data.pair_anchor]
    per_row = {str(k): int((found == k).sum()) for k in range(count + 1)}
    keep = np.nonzero(found == count)[0]
    if not len(keep):
        raise DataError(
            f"no (anchor, positive) pair got {count} negatives (rows by negatives found: {per_row}; skipped candidates: {skipped}); "
            "the range or the margins leave too few candidates: widen range_max, lower range_min, loosen the margins or max_score, or ask fewer negatives",
            source=data.source,
        )
    return keep, per_row


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
    show_progress: bool = False,
    say: Callable[[str], None] | None = None,
) -> MineReport:
    """Mine hard negatives for the (anchor, positive) ``pairs`` (a file or anything
    :func:`~anglekit.data.triplets.read_triplets` reads; ``columns`` maps anchor/positive to its
    names) from ``corpus`` (a .txt/.jsonl/.csv/.tsv/.parquet corpus; default: the distinct
    positives) with ``model`` (an Embedder or a name loaded with ``model_kwargs``), and write
    ``output`` (.jsonl or .parquet) with its summary and histogram (see the module doc)."""
    from anglekit.model.embedder import Embedder

    started = time.perf_counter()
    say = say or logger.info
    settings = settings or MineSettings()
    out = Path(os.fspath(output)).expanduser()
    if out.suffix.lower() not in OUTPUT_FORMATS:
        raise ConfigError(f"--output {out}: must end in {' or '.join(OUTPUT_FORMATS)} (the n-tuple layout anglekit train reads)")
    summary_path, histogram_path = _side_paths(out)
    work = Path(os.fspath(work_dir)).expanduser() if work_dir is not None else out.with_name(out.name + ".mine")
    data = _read_pairs(pairs, columns)
    work.mkdir(parents=True, exist_ok=True)
    _write_jsonl_texts(work / "queries.jsonl", data.anchors)
    corpus_path = _corpus_path(corpus, data, work, (out, summary_path, histogram_path))
    if corpus is None:
        corpus_text_column = corpus_id_column = None
    scanned = _scan_corpus(corpus_path, corpus_text_column, corpus_id_column)
    positive_rows = _check_positives(data, scanned, corpus_path)
    timings: dict[str, float] = {"read": time.perf_counter() - started}

    t0 = time.perf_counter()
    embedder = model if isinstance(model, Embedder) else Embedder.from_pretrained(os.fspath(model), **(model_kwargs or {}))
    corpus_shards, query_shards = _encode(embedder, work, (corpus_path, corpus_text_column, corpus_id_column), work / "queries.jsonl", shard_size,
                                          batch_size, show_progress, say)  # fmt: skip
    timings["encode"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    query_vectors = _unit(query_shards.load()[1])
    positive_scores = np.einsum("ij,ij->i", query_vectors[data.pair_anchor], _unit(_gather(corpus_shards, positive_rows)))
    positives = _positive_sets(data, positive_scores)
    width = min(scanned.distinct, settings.window(positives[0].shape[1]) + positives[0].shape[1])
    scores, rows = _candidates(work, query_shards, corpus_shards, settings, width, scanned.first(), say)
    timings["search"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    neg_rows, neg_scores, skipped = _select_all(rows, scores, scanned, positives, settings)
    keep, per_row = _complete_rows(neg_rows, data, settings.num_negatives, skipped)
    kept_rows, kept_scores = neg_rows[data.pair_anchor[keep]], neg_scores[data.pair_anchor[keep]]
    table = _table(data, keep, kept_rows, kept_scores, positive_scores, scanned)
    timings["select"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - started

    summary = {
        "output": str(out), "format": OUTPUT_FORMATS[out.suffix.lower()], "model": embedder.source, "model_fingerprint": embedder.fingerprint(),
        "pairs_source": data.source, "rows_read": data.read, "duplicate_pairs": data.duplicates, "pairs": len(data.pair_positive),
        "anchors": len(data.anchors), "corpus": str(corpus_path) if corpus is not None else "the distinct positives",
        "corpus_rows": corpus_shards.rows, "corpus_repeated_texts": corpus_shards.rows - scanned.distinct, "candidates_per_query": width,
        "rows_written": int(len(keep)), "negatives_per_row": per_row, "skipped": {name: skipped[name] for name in FILTERS if skipped.get(name)},
        "scores": {"positive": _stats(positive_scores[keep]), "negative": _stats(kept_scores.reshape(-1)),
                   "difference": _stats((positive_scores[keep][:, None] - kept_scores).reshape(-1))},
        "settings": asdict(settings), "work_dir": str(work), "seconds": {k: round(v, 3) for k, v in timings.items()},
    }  # fmt: skip
    _histogram(histogram_path, positive_scores[keep], kept_scores.reshape(-1), f"{out.name}: {len(keep)} rows x {settings.num_negatives} negatives")
    _write_output(out, table)
    atomic_write_json(summary_path, summary)  # last: a summary means the output beside it is complete
    return MineReport(out, summary_path, histogram_path, int(len(keep)), summary)
