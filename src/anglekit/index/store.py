"""VectorIndex: ids, texts and unit vectors of one model, searched exactly or through HNSW.

The index belongs to the model that embedded it: it records the model's name (and folder), its
settings and its :meth:`~anglekit.model.embedder.Embedder.fingerprint`; documents are embedded with
the model's document prompt and queries with its query prompt (where it has them), vectors are
L2-normalised and scores are cosines. Searching with another model (or the same name whose
weights changed) raises :class:`~anglekit.errors.ModelMismatchError`.

- ``kind="exact"`` scans every vector (torch matrix products in blocks); ``kind="hnsw"`` searches a
  graph (usearch or faiss-cpu, :mod:`anglekit.index.graph`).
- ``quantize="int8"|"binary"`` searches codes (:mod:`anglekit.index.quantize`) and rescores the
  best ``k x rescore_multiplier`` candidates with the float vectors, which stay on disk
  (memory-mapped) after :meth:`VectorIndex.load`.

On disk (:meth:`save`): ``index.json`` and data files named by generation (``vectors-000002.npy``,
``labels-…``, ``ids-….json``, ``texts-….json``, ``codes-….npy``, ``graph-….usearch|faiss``). Files
of a new generation are written first, ``index.json`` (their sizes and SHA-256) atomically after,
and the old generation removed last: a save killed at any moment leaves the old or the new index.
:meth:`VectorIndex.load` checks every file against its size and SHA-256 (a file corrupted at the
same size is a :class:`~anglekit.errors.DataError` naming it); an index.json without checksums (an
older index) still loads, with a warning that its files are not verified.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError, DiskFullError, InputPathError
from anglekit.index.graph import GraphSettings, load_graph, make_graph, resolve_backend
from anglekit.index.quantize import QUANTIZATIONS, binary_codes, block_scorer, int8_codes, int8_scale, rescore, top_k
from anglekit.io.atomic import atomic_path, atomic_write, atomic_write_json
from anglekit.io.read import describe
from anglekit.io.text import is_blank
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.version import __version__

__all__ = ["INDEX_FILE", "KINDS", "Hit", "IndexSettings", "VectorIndex", "model_record"]

logger = logging.getLogger("anglekit.index")

INDEX_FILE = "index.json"
FORMAT = "anglekit-index"
FORMAT_VERSION = 1
KINDS = ("exact", "hnsw")
_LOAD_KEYS = ("pooling", "prompt", "query_prompt", "document_prompt", "prompts", "prompt_preprocess", "normalize", "max_length",
              "padding_side", "bidirectional", "base_model")  # fmt: skip
"""EmbedderConfig fields handed back to ``Embedder.from_pretrained`` to load the index's model."""


@dataclass(frozen=True)
class Hit:
    """One search result: the document's id, its cosine to the query, its text (when stored)."""

    id: str
    score: float
    text: str | None = None


@dataclass(frozen=True)
class IndexSettings:
    """How the index stores and searches (recorded in ``index.json``)."""

    kind: str = "exact"
    quantize: str = "none"
    backend: str | None = None
    """HNSW only: ``usearch`` or ``faiss`` (``auto`` picks at creation)."""
    rescore_multiplier: int = 4
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 128
    build_threads: int = 0
    """HNSW only: threads that insert documents (0: every core; 1: the same graph every time)."""
    store_texts: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"index kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.quantize not in QUANTIZATIONS:
            raise ConfigError(f"quantize must be one of {', '.join(QUANTIZATIONS)}, got {self.quantize!r}")
        for name, least in (("rescore_multiplier", 1), ("connectivity", 2), ("expansion_add", 1), ("expansion_search", 1), ("build_threads", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(f"{name} must be an integer >= {least}{' (0: every core)' if name == 'build_threads' else ''}, got {value!r}")
        if self.kind == "exact" and self.backend is not None:
            raise ConfigError("backend applies to kind 'hnsw' only")
        if self.kind == "hnsw":
            object.__setattr__(self, "backend", resolve_backend(self.backend or "auto"))

    def graph(self) -> GraphSettings:
        return GraphSettings(self.connectivity, self.expansion_add, self.expansion_search, self.build_threads)


def model_record(model: Any, name: str | None = None, load: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the index records of ``model`` (an Embedder): name, folder, settings, fingerprint, dim."""
    name = name or model.source
    path = Path(name).expanduser()
    return {
        "name": name,
        "path": str(path.resolve()) if path.exists() else None,
        "fingerprint": model.fingerprint(),
        "embedder_config": model.config.to_dict(),
        "load": {k: v for k, v in (load or {}).items() if k in ("dtype", "revision", "trust_remote_code", "gguf_file") and v},
        "dim": int(getattr(model, "output_dim", model.dim)),
    }


def _digest(path: Path) -> dict[str, Any]:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _unit(vectors: Any, dim: int, what: str) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[1] != dim:
        raise DataError(f"{what}: expected a [n, {dim}] matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        row = int(np.nonzero(~np.isfinite(array).all(axis=1))[0][0])
        raise DataError(f"{what}: vector {row + 1} is not finite")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if (norms == 0).any():
        raise DataError(f"{what}: vector {int(np.nonzero(norms[:, 0] == 0)[0][0]) + 1} is all zeros (no direction to search by)")
    return array / norms


def _check_ids(ids: Sequence[Any], what: str = "ids") -> list[str]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise DataError(f"{what} must be a list of strings or integers, got {type(ids).__name__}")
    out = []
    for i, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, (str, int, np.integer)):
            raise DataError(f"{what}: item {i + 1} is {type(value).__name__}, expected a string or an integer")
        text = str(value)
        if not text:
            raise DataError(f"{what}: item {i + 1} is an empty id")
        out.append(text)
    return out


@dataclass
class VectorIndex:
    """A searchable set of (id, unit vector[, text]) of one model. Build with :meth:`create` or
    :meth:`build`, reopen with :meth:`load`."""

    model_info: dict[str, Any]
    settings: IndexSettings = field(default_factory=IndexSettings)
    model: Any = None
    """The Embedder (loaded from ``model_info`` on first need when None)."""

    def __post_init__(self) -> None:
        self.dim = int(self.model_info["dim"])
        self.ids: list[str] = []
        self.texts: list[str | None] = []
        self._row: dict[str, int] = {}
        self._vectors = np.zeros((0, self.dim), np.float32)
        self._labels = np.zeros(0, np.uint64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._codes: np.ndarray | None = None
        self._scale: float | None = None
        self._graph: Any = None
        self._in_graph = 0
        self._next_label = 0
        self._generation = 0
        self._model_checked = self.model is None
        self.folder: Path | None = None
        """The folder it was loaded from or last saved to (None: only in memory)."""

    # ----------------------------------------------------------------- creation
    @classmethod
    def create(cls, model: Any, *, name: str | None = None, load: dict[str, Any] | None = None, **settings: Any) -> VectorIndex:
        """An empty index for ``model`` (an Embedder; ``name``: how to load it again, default its
        source; ``load``: its dtype/revision/trust_remote_code/gguf_file); ``settings``: see
        :class:`IndexSettings`."""
        index = cls(model_record(model, name, load), IndexSettings(**settings), model)
        index._model_checked = True
        return index

    @classmethod
    def build(cls, model: Any, ids: Sequence[Any], texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE, **settings: Any) -> VectorIndex:
        """:meth:`create` then :meth:`add`."""
        index = cls.create(model, **settings)
        index.add(ids, texts, batch_size=batch_size)
        return index

    # ----------------------------------------------------------------- model
    def load_model(self, name: str | None = None, **load: Any) -> Any:
        """Load the index's model (from ``name`` if given, else the recorded folder or name) with
        its recorded settings; ``load``: device, dtype, revision, trust_remote_code over the
        recorded ones. A ModelMismatchError unless it is the same model."""
        from anglekit.model.embedder import Embedder

        info = self.model_info
        config = info["embedder_config"]
        kwargs = {key: config.get(key) for key in _LOAD_KEYS if config.get(key) is not None}
        options = {**info.get("load", {}), **{k: v for k, v in load.items() if v is not None}}
        model = Embedder.from_pretrained(name or info.get("path") or info["name"], **kwargs, **options)
        self.check_model(model)
        self.model, self._model_checked = model, True
        return model

    def _model(self) -> Any:
        if self.model is None:
            return self.load_model()
        if not self._model_checked:
            self.check_model(self.model)
            self._model_checked = True
        return self.model

    def check_model(self, model: Any) -> None:
        """A ModelMismatchError unless ``model`` is the one the index was built with (same
        fingerprint, :mod:`anglekit.model.identity`). A fingerprint of the older scheme that
        ``model`` reproduces here is accepted and replaced by the current one at the next save."""
        from anglekit.model.identity import ModelIdentity

        recorded, identity = self.model_info["fingerprint"], ModelIdentity(model)
        found = identity.check(
            recorded, what=f"this index was built with {self.model_info['name']}", path=self.folder or "INDEX_DIR",
            advice="Search with the index's own model, or build a new index",
        )  # fmt: skip
        if found == "legacy":
            self.model_info["fingerprint"] = identity.current
            logger.info("%s: fingerprint %s (older scheme) matches; the next save records %s", self.folder or "index", recorded, self.model_info["fingerprint"])

    # ----------------------------------------------------------------- adding and deleting
    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, ident: Any) -> bool:
        return str(ident) in self._row

    @property
    def codes(self) -> np.ndarray | None:
        """The int8 codes or packed bits of a quantized index, one row per id (None for ``quantize="none"``)."""
        self._sync()
        return self._codes

    @property
    def int8_scale(self) -> float | None:
        """The scale of an int8 index's codes (``x ~ code * scale``); None for another quantization
        or before the codes exist."""
        return self._scale if self.settings.quantize == "int8" else None

    @property
    def vectors(self) -> np.ndarray:
        """The unit float32 vectors, one row per id (memory-mapped after :meth:`load`)."""
        self._flush()
        return self._vectors

    def add(self, ids: Sequence[Any], texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        """Embed ``texts`` (the model's document prompt) and add them under ``ids``."""
        from anglekit.data.sources import text_problem

        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise DataError(f"texts must be a list of strings, got {type(texts).__name__}")
        for i, text in enumerate(texts):
            problem = text_problem(text)
            if problem is not None:
                raise DataError(f"texts: item {i + 1}: {problem[1]}")
        checked = self._new_ids(ids, len(texts))
        model = self._model()
        vectors = model.encode(list(texts), batch_size, normalize=True, role=model.config.role_if_present("document"))
        self._append(checked, vectors, list(texts) if self.settings.store_texts else None)

    def add_vectors(self, ids: Sequence[Any], vectors: Any, texts: Sequence[str] | None = None) -> None:
        """Add vectors embedded elsewhere by this index's model (with its document prompt)."""
        array = np.asarray(vectors)
        checked = self._new_ids(ids, len(array) if array.ndim else -1)
        if texts is not None and len(texts) != len(checked):
            raise DataError(f"{len(checked)} ids but {len(texts)} texts")
        self._append(checked, array, list(texts) if texts is not None and self.settings.store_texts else None)

    def _new_ids(self, ids: Sequence[Any], count: int) -> list[str]:
        checked = _check_ids(ids)
        if len(checked) != count:
            raise DataError(f"{len(checked)} ids for {count} documents")
        seen: set[str] = set()
        for ident in checked:
            if ident in self._row:
                raise DataError(f"id {ident!r} is already in the index; delete it first to replace it")
            if ident in seen:
                raise DataError(f"id {ident!r} appears twice in this batch")
            seen.add(ident)
        return checked

    def _append(self, ids: list[str], vectors: Any, texts: list[str] | None) -> None:
        unit = _unit(vectors, self.dim, "vectors") if len(ids) else np.zeros((0, self.dim), np.float32)
        labels = np.arange(self._next_label, self._next_label + len(ids), dtype=np.uint64)
        self._next_label += len(ids)
        start = len(self.ids)
        self.ids.extend(ids)
        self.texts.extend(texts if texts is not None else [None] * len(ids))
        for i, ident in enumerate(ids):
            self._row[ident] = start + i
        self._pending.append((unit, labels))

    def delete(self, ids: Sequence[Any]) -> int:
        """Remove the documents with these ids (unknown ids are a DataError, nothing removed); the count."""
        checked = _check_ids(ids)
        missing = [i for i in checked if i not in self._row]
        if missing:
            raise DataError(f"{len(missing)} id(s) not in the index: {', '.join(map(repr, missing[:5]))}")
        self._flush()
        rows = np.unique(np.fromiter((self._row[i] for i in checked), dtype=np.int64, count=len(checked)))
        keep = np.ones(len(self.ids), dtype=bool)
        keep[rows] = False
        gone = self._labels[rows]
        if self._graph is not None:
            in_graph = gone[rows < self._in_graph]
            if self._graph.removes:
                self._graph.remove(in_graph)
                self._in_graph -= len(in_graph)
            elif len(in_graph):
                self._graph, self._in_graph = None, 0  # faiss: rebuilt at the next search or save
        self._vectors = np.asarray(self._vectors)[keep]
        self._labels = self._labels[keep]
        if self._codes is not None:
            self._codes = np.asarray(self._codes)[keep[: len(self._codes)]]
        self.ids = [i for i, k in zip(self.ids, keep, strict=True) if k]
        self.texts = [t for t, k in zip(self.texts, keep, strict=True) if k]
        self._row = {ident: row for row, ident in enumerate(self.ids)}
        return len(rows)

    # ----------------------------------------------------------------- derived data
    def _flush(self) -> None:
        if self._pending:
            self._vectors = np.concatenate([np.asarray(self._vectors), *(v for v, _ in self._pending)])
            self._labels = np.concatenate([self._labels, *(lab for _, lab in self._pending)])
            self._pending = []

    def _sync(self) -> None:
        """Codes and graph for every row (new rows are coded and inserted in one go)."""
        self._flush()
        quantize, n = self.settings.quantize, len(self.ids)
        if quantize != "none":
            if self._scale is None and quantize == "int8" and n:
                self._scale = int8_scale(np.asarray(self._vectors))
            done = 0 if self._codes is None else len(self._codes)
            if self._codes is None or done < n:
                fresh = self._encode_codes(np.asarray(self._vectors[done:]))
                self._codes = fresh if self._codes is None else np.concatenate([np.asarray(self._codes), fresh])
        if self.settings.kind == "hnsw":
            if self._graph is None:
                self._graph = make_graph(str(self.settings.backend), self.dim, quantize, self.settings.graph())
                self._in_graph = 0
            if self._in_graph < n:
                self._graph.add(self._labels[self._in_graph :], self._graph_data(self._in_graph, n))
                self._in_graph = n

    def _encode_codes(self, vectors: np.ndarray) -> np.ndarray:
        if self.settings.quantize == "binary":
            return binary_codes(vectors)
        return int8_codes(vectors, self._scale or int8_scale(vectors))

    def _graph_data(self, start: int, stop: int) -> np.ndarray:
        quantize = self.settings.quantize
        if quantize == "none" or (quantize == "int8" and self.settings.backend == "faiss"):
            return np.asarray(self._vectors[start:stop], dtype=np.float32)
        assert self._codes is not None
        return np.asarray(self._codes[start:stop])

    def _graph_queries(self, queries: np.ndarray) -> np.ndarray:
        quantize = self.settings.quantize
        if quantize == "binary":
            return binary_codes(queries)
        if quantize == "int8" and self.settings.backend == "usearch":
            return int8_codes(queries, int8_scale(queries))  # cosine in the graph: any positive scale ranks the same
        return queries

    # ----------------------------------------------------------------- search
    def search(self, queries: str | Sequence[str], k: int = 10, *, batch_size: int = DEFAULT_BATCH_SIZE, **options: Any) -> Any:
        """The ``k`` best documents of each query (embedded with the model's query prompt): a list
        of :class:`Hit` for one string, a list of lists for a list. ``options``: see :meth:`search_vectors`."""
        single = isinstance(queries, str)
        items = [queries] if single else queries
        if not isinstance(items, Sequence) or not items or not all(isinstance(q, str) for q in items):
            raise DataError("queries must be a non-empty string or a list of non-empty strings")
        blank = next((i for i, q in enumerate(items) if is_blank(q)), None)
        if blank is not None:
            raise DataError(f"query {blank + 1} is blank (only whitespace or invisible characters): {items[blank]!r}")
        model = self._model()
        vectors = model.encode(list(items), batch_size, normalize=True, role=model.config.role_if_present("query"))
        rows = self.search_hits(vectors, k, **options)
        return rows[0] if single else rows

    def search_hits(self, queries: Any, k: int = 10, **options: Any) -> list[list[Hit]]:
        """:meth:`search_vectors` as :class:`Hit` lists (id, cosine, stored text), one per query vector."""
        ids, scores = self.search_vectors(queries, k, **options)
        return [
            [Hit(i, float(s), self.texts[self._row[i]]) for i, s in zip(row_ids, row_scores, strict=True)]
            for row_ids, row_scores in zip(ids, scores, strict=True)
        ]

    def search_vectors(
        self, queries: Any, k: int = 10, *, rescore_multiplier: int | None = None, expansion_search: int | None = None
    ) -> tuple[list[list[str]], np.ndarray]:
        """(ids, cosines) of the ``k`` best documents for each query vector (embedded by this
        index's model with its query prompt), best first; fewer than ``k`` when the index is smaller."""
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        multiplier = self.settings.rescore_multiplier if rescore_multiplier is None else rescore_multiplier
        expansion = self.settings.expansion_search if expansion_search is None else expansion_search
        for name, value in (("rescore_multiplier", multiplier), ("expansion_search", expansion)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        q = _unit(np.atleast_2d(np.asarray(queries, dtype=np.float32)), self.dim, "queries")
        self._sync()
        n = len(self.ids)
        if n == 0:
            return [[] for _ in range(len(q))], np.zeros((len(q), 0), np.float32)
        quantize, width = self.settings.quantize, min(n, k if self.settings.quantize == "none" else k * multiplier)
        if self.settings.kind == "exact":
            matrix = self._vectors if quantize == "none" else self._codes
            scores, rows = top_k(q, n, width, block_scorer(quantize, matrix, self.dim, self._scale))
            if quantize == "none":
                scores, rows = scores[:, :k], rows[:, :k]
            else:
                scores, rows = rescore(q, rows, self._vectors, k)
        else:
            labels = self._graph.search(self._graph_queries(q), width, expansion)
            found = labels >= 0
            positions = np.searchsorted(self._labels, np.where(found, labels, 0).astype(np.uint64))
            positions = np.clip(positions, 0, n - 1)
            valid = found & (self._labels[positions] == labels.astype(np.uint64))
            scores, rows = rescore(q, np.where(valid, positions, -1), self._vectors, k)
        ids = [[self.ids[r] for r in row if r >= 0] for row in rows]
        return ids, np.where(rows >= 0, scores, np.nan)[:, : max((len(r) for r in ids), default=0)]

    # ----------------------------------------------------------------- save and load
    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the index to ``directory`` (see the module doc): the old generation stays valid until the new one is complete
        (a full disk is a :class:`DiskFullError` that says so)."""
        try:
            return self._save(directory)
        except DiskFullError as exc:
            folder = Path(directory)
            before = (
                f"its {INDEX_FILE} was not replaced, so the index saved before is intact"
                if (folder / INDEX_FILE).is_file()
                else f"no {INDEX_FILE} was written, so {folder} holds no usable index"
            )
            raise DiskFullError(
                f"{exc} The index was not saved: {before}; free some space and save again.", path=exc.path, requested=exc.requested, written=exc.written
            ) from exc

    def _save(self, directory: str | os.PathLike[str]) -> Path:

        self._sync()
        folder = Path(directory)
        old = _read_manifest(folder) if (folder / INDEX_FILE).is_file() else None
        if old is None and folder.is_dir() and any(folder.iterdir()):
            raise ConfigError(f"{folder}: holds files but no {INDEX_FILE}; give a new or empty folder for the index")
        folder.mkdir(parents=True, exist_ok=True)
        generation = max(self._generation, int(old["generation"]) if old else 0) + 1
        tag = f"{generation:06d}"
        files: dict[str, str | None] = {"vectors": f"vectors-{tag}.npy", "labels": f"labels-{tag}.npy", "ids": f"ids-{tag}.json",
                                        "texts": None, "codes": None, "graph": None}  # fmt: skip

        def save_array(name: str, array: np.ndarray) -> None:
            atomic_write(folder / name, lambda handle: np.save(handle, np.ascontiguousarray(array)), binary=True)

        save_array(str(files["vectors"]), np.asarray(self._vectors))
        save_array(str(files["labels"]), self._labels)
        atomic_write(folder / str(files["ids"]), lambda handle: handle.write(json.dumps(self.ids, ensure_ascii=False)))
        if self.settings.store_texts:
            files["texts"] = f"texts-{tag}.json"
            atomic_write(folder / files["texts"], lambda handle: handle.write(json.dumps(self.texts, ensure_ascii=False)))
        if self._codes is not None:
            files["codes"] = f"codes-{tag}.npy"
            save_array(files["codes"], np.asarray(self._codes))
        if self._graph is not None:
            files["graph"] = f"graph-{tag}.{self.settings.backend}"
            with atomic_path(folder / files["graph"]) as tmp:
                self._graph.save(tmp)
        manifest = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "created_by": f"anglekit {__version__}",
            "generation": generation,
            "model": self.model_info,
            "settings": asdict(self.settings),
            "metric": "cosine",
            "count": len(self.ids),
            "dim": self.dim,
            "next_label": self._next_label,
            "int8_scale": self._scale,
            "files": files,
            "digests": {name: _digest(folder / name) for name in files.values() if name},
        }
        atomic_write_json(folder / INDEX_FILE, manifest)
        self._generation = generation
        self.folder = folder
        current = {name for name in files.values() if name}
        for path in folder.iterdir():
            name = path.name[1:] if path.name.startswith(".") and path.name.endswith(".tmp") else path.name  # a killed save's temporary file
            stem = name.split(".")[0]
            if "-" in stem and stem.rsplit("-", 1)[1].isdigit() and path.name not in current and stem.split("-")[0] in files:
                path.unlink(missing_ok=True)  # an older generation, or what a killed save left
        return folder

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, model: Any = None, verify: bool = True, mmap: bool = True) -> VectorIndex:
        """Open a saved index. ``model``: the Embedder to search with (checked against the index's
        fingerprint; default: loaded from the recorded name and settings on the first text query).
        Every file's size and SHA-256 are checked against index.json (``verify=False``: sizes only,
        for a large index on trusted storage); float vectors are memory-mapped unless ``mmap=False``."""
        folder = Path(directory)
        manifest = _read_manifest(folder)
        files = manifest["files"]
        _check_files(folder, manifest, verify)
        try:
            settings = IndexSettings(**manifest["settings"])
            index = cls(manifest["model"], settings, model)
            index._vectors = np.load(folder / files["vectors"], mmap_mode="r" if mmap else None, allow_pickle=False)
            index._labels = np.load(folder / files["labels"], allow_pickle=False)
            index.ids = json.loads((folder / files["ids"]).read_text(encoding="utf-8"))
            index.texts = json.loads((folder / files["texts"]).read_text(encoding="utf-8")) if files.get("texts") else [None] * len(index.ids)
            if files.get("codes"):
                index._codes = np.load(folder / files["codes"], mmap_mode="r" if mmap else None, allow_pickle=False)
            if files.get("graph"):
                index._graph = load_graph(str(settings.backend), folder / files["graph"], index.dim, settings.quantize, settings.graph())
                index._in_graph = len(index.ids)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"the index cannot be read ({type(exc).__name__}: {exc})", source=str(folder)) from None
        if not (len(index.ids) == len(index.texts) == len(index._labels) == len(index._vectors) == manifest["count"]):
            raise DataError("the index's files disagree on the number of documents", source=str(folder))
        index._row = {ident: row for row, ident in enumerate(index.ids)}
        index._scale = manifest.get("int8_scale")
        index._next_label = int(manifest["next_label"])
        index._generation = int(manifest["generation"])
        index.folder = folder
        if model is not None:
            index.check_model(model)
            index._model_checked = True
        return index


def _check_files(folder: Path, manifest: dict[str, Any], verify: bool) -> None:
    """Each data file is present, of its recorded size and (``verify``) SHA-256; files without a
    recorded checksum (an index saved by an older anglekit) are only warned about."""
    digests = manifest.get("digests")
    named = [name for name in manifest["files"].values() if isinstance(name, str) and name]
    unverified = []
    for name in dict.fromkeys([*named, *(digests or {})]):
        path = folder / name
        if not path.is_file():
            raise DataError(f"{name} is missing: the index is incomplete", source=str(folder))
        expected = (digests or {}).get(name)
        if expected is None or "sha256" not in expected:
            unverified.append(name)
        if expected is None:
            continue
        size = path.stat().st_size
        if size != expected["bytes"]:
            raise DataError(f"{name} has {size} bytes, index.json says {expected['bytes']} (truncated or rewritten)", source=str(folder))
        if verify and "sha256" in expected and _digest(path)["sha256"] != expected["sha256"]:
            raise DataError(
                f"{name} does not match the SHA-256 recorded in {INDEX_FILE} when the index was saved (corrupt, though its "
                f"size of {size} bytes is right); rebuild the index or restore this file",
                source=str(folder),
            )
    if unverified:
        logger.warning(
            "%s: %s records no checksum for %s (an index saved by an older anglekit): not verified; save the index again to record them",
            folder,
            INDEX_FILE,
            ", ".join(unverified),
        )


def _check_manifest(data: dict[str, Any], source: str) -> None:
    """The keys :meth:`VectorIndex.load` reads have their types, else a DataError naming the key."""

    for key in ("version", "generation", "count", "next_label"):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DataError(f"expected an integer >= 0, got {describe(value)}", source=source, field=key)
    for key in ("files", "digests", "settings", "model"):
        if key == "digests" and key not in data:
            continue  # an older index: loads with a warning that nothing is verified
        if not isinstance(data.get(key), dict):
            raise DataError(f"expected an object, got {describe(data.get(key))}", source=source, field=key)
    for name, digest in data.get("digests", {}).items():
        old = isinstance(digest, dict) and "sha256" not in digest  # sizes only: an older index
        if not (
            isinstance(digest, dict)
            and isinstance(digest.get("bytes"), int)
            and not isinstance(digest.get("bytes"), bool)
            and (old or isinstance(digest.get("sha256"), str))
        ):
            raise DataError(f"expected {{'bytes': N, 'sha256': HEX}}, got {describe(digest)}", source=source, field=f"digests.{name}")


def _read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / INDEX_FILE
    if path.is_dir():  # an index folder, broken: the data
        raise DataError(f"{INDEX_FILE} is a folder, not a file", source=str(folder))
    if not path.is_file():  # the command names no index: a usage error (exit 2)
        raise InputPathError(f"no {INDEX_FILE}: not an index folder (build one with 'anglekit index build')", source=str(folder))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"unreadable {INDEX_FILE} ({exc})", source=str(folder)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError(f"{INDEX_FILE} is not an anglekit index manifest", source=str(folder))
    _check_manifest(data, str(path))
    if int(data.get("version", 0)) > FORMAT_VERSION:
        raise ConfigError(f"{folder}: written by a newer anglekit (index format {data['version']}); upgrade anglekit")
    return data
