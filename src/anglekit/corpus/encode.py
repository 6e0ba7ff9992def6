"""Encode a corpus of any size into numbered shards, in constant memory, resumable after a kill -9.

:func:`encode_corpus` reads the corpus in chunks of ``shard_size`` records (:func:`iter_corpus`);
chunk ``k`` becomes shard ``k`` (format: :mod:`anglekit.corpus.shards`). On a rerun with the same
settings, a shard whose record exists and whose files match it is kept as it is, unread and not
recomputed; any other is encoded again and replaces what is there, so a run killed at any moment
resumes without duplicates, and its shards are byte-identical to those of an uninterrupted run
(same model, settings, batch size and thread count).

Split the work: ``num_shards=N, shard_id=i`` takes the shards ``k`` with ``k % N == i`` (N machines,
one folder or one each); ``workers=W`` runs W processes (``spawn``) on this machine, each loading the
model once and taking every W-th of those shards.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.corpus.reader import DEFAULT_CHUNK_ROWS, corpus_format, corpus_signature, iter_corpus
from anglekit.corpus.shards import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    SHARD_FORMATS,
    check_shard,
    file_digest,
    finished_shards,
    read_manifest,
    record_path,
    shard_files,
    shard_name,
)
from anglekit.errors import ConfigError, DiskFullError, InputPathError, ModelMismatchError, OutputError
from anglekit.io.atomic import atomic_path, atomic_write, atomic_write_json
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.model.encoding import zero_rows_message
from anglekit.version import __version__

__all__ = ["EncodeReport", "EncodeRequest", "encode_corpus"]

logger = logging.getLogger(__name__)

_IDENTITY = ("input", "columns", "model_fingerprint", "embedder_config", "role", "normalize", "dim", "shard_size", "shard_format")
"""Manifest keys that must agree for a rerun to resume a folder."""


@dataclass(frozen=True)
class EncodeReport:
    """What :func:`encode_corpus` did: ``encoded`` shards now, ``reused`` finished ones kept."""

    output_dir: Path
    rows: int
    shards: int
    encoded: int
    reused: int
    dim: int
    seconds: float
    resumed: str | None = None
    """Where a resumed run restarted (which shards and rows were already done), else None."""
    loaded_model: bool = True
    """False when every shard was already done and the model was not even loaded."""

    def summary(self) -> str:
        done = (
            f"{self.rows} texts in {self.shards} shards of {self.dim}-d vectors in {self.output_dir}: "
            f"{self.encoded} encoded now, {self.reused} already done ({self.seconds:.1f} s)"
        )
        if not self.loaded_model:
            return done + "; nothing to do (the model was not loaded)"
        return done + (f"; {self.resumed}" if self.resumed else "")


@dataclass(frozen=True)
class _Job:
    """Everything a worker process needs (picklable)."""

    input: str
    output_dir: str
    text_column: str | None
    id_column: str | None
    shard_size: int
    shard_format: str
    batch_size: int
    normalize: bool
    role: str | None
    shard_id: int
    num_shards: int
    workers: int
    model: str
    model_kwargs: dict[str, Any]
    threads: int | None = None

    def owns(self, index: int, worker: int) -> bool:
        return index % self.num_shards == self.shard_id and (index // self.num_shards) % self.workers == worker


def _check_arguments(shard_size: int, shard_format: str, batch_size: int, shard_id: int, num_shards: int, workers: int, role: Any) -> None:
    for name, value, low in (("shard_size", shard_size, 1), ("batch_size", batch_size, 1), ("num_shards", num_shards, 1),
                             ("workers", workers, 1), ("shard_id", shard_id, 0)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    if shard_id >= num_shards:
        raise ConfigError(f"shard_id must be below num_shards ({num_shards}), got {shard_id}")
    if shard_format not in SHARD_FORMATS:
        raise ConfigError(f"shard format must be one of {', '.join(SHARD_FORMATS)}, got {shard_format!r}")
    if role is not None and (not isinstance(role, str) or not role.strip()):
        raise ConfigError(f"role must be the name of one of the model's prompts (query, document, ...) or None, got {role!r}")


def _prepare_folder(folder: Path, manifest: dict[str, Any], embedder: Any) -> bool:
    """Create ``folder`` with ``manifest`` (False), or check that the one there describes the same
    encode (True: a rerun). The recorded model fingerprint is checked against ``embedder`` through
    :class:`~anglekit.model.identity.ModelIdentity`: one of the older scheme that it reproduces here
    is accepted and re-recorded in the current scheme."""
    from anglekit.model.identity import MIGRATE, ModelIdentity, is_current

    old = read_manifest(folder)
    if old is None:
        if folder.is_dir() and any(folder.iterdir()):
            raise OutputError(f"{folder}: holds files but no {MANIFEST}; give a new or empty folder for the shards")
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / MANIFEST, manifest)
        return False
    differ = [key for key in _IDENTITY if key != "model_fingerprint" and old.get(key) != manifest.get(key)]
    recorded = old.get("model_fingerprint")
    match = ModelIdentity(embedder, current=manifest["model_fingerprint"]).match(recorded)
    if match is None:
        differ.insert(_IDENTITY.index("model_fingerprint"), "model_fingerprint")
    if differ:
        error = ModelMismatchError if differ == ["model_fingerprint"] else ConfigError
        legacy = (
            f" (its model_fingerprint {recorded} is of the older scheme, whose value changed with the thread count and CPU: if this "
            f"model encoded those shards, re-record it without recomputing any vector: {MIGRATE.format(path=folder)})"
            if "model_fingerprint" in differ and isinstance(recorded, str) and not is_current(recorded)
            else ""
        )
        raise error(
            f"{folder} holds the shards of another encode (it differs in: {', '.join(differ)}){legacy}; give another --output-dir, or delete this one to start over"
        )
    if match == "legacy":
        atomic_write_json(folder / MANIFEST, {**old, "model_fingerprint": manifest["model_fingerprint"]})
        logger.info("%s: model fingerprint %s (older scheme) re-recorded as %s", folder, recorded, manifest["model_fingerprint"])
    return True


def _model_files(name: str) -> list[list[Any]] | None:
    """A cheap signature of a local model: each file's path, size and modification time; None for
    a name that is not a local file or folder (a hub id's files are known only once loaded)."""
    from anglekit.model.offline import resolve_model_name

    try:
        path = Path(resolve_model_name(name)).expanduser()
    except ConfigError:
        return None
    if path.is_file():
        base, files = path.parent, [path]
    elif path.is_dir():
        base, files = path, sorted(p for p in path.rglob("*") if p.is_file())
    else:
        return None
    signature = []
    for file in files:
        stat = file.stat()
        signature.append([file.relative_to(base).as_posix(), stat.st_size, stat.st_mtime_ns])
    return signature


def _request(
    name: str,
    kwargs: dict[str, Any],
    normalize: bool | None,
    role: str | None,
    text_column: str | None,
    id_column: str | None,
    shard_size: int,
    shard_format: str,
    source: Path,
) -> dict[str, Any] | None:
    """What the caller asked for, as the manifest stores it (JSON), when the model is local; a
    rerun asking the same of unchanged files and input has nothing to do if every shard is done."""
    import json

    files = _model_files(name)
    if files is None:
        return None
    request = {"model": name, "model_files": files, "model_kwargs": kwargs, "normalize": normalize, "role": role,
               "columns": {"text": text_column, "id": id_column}, "shard_size": shard_size, "shard_format": shard_format,
               "input": corpus_signature(source)}  # fmt: skip
    return json.loads(json.dumps(request, sort_keys=True, default=str))


def _all_done(folder: Path, request: dict[str, Any] | None, shard_id: int, num_shards: int) -> tuple[int, int, int, int] | None:
    """(rows, shards, shards of this split, dim) when a finished encode of the same request has
    every shard of this split finished and intact; else None (the model is needed)."""
    if request is None:
        return None
    manifest = read_manifest(folder) if folder.is_dir() else None
    if manifest is None or manifest.get("request") != request or manifest.get("rows") is None or manifest.get("shards") is None:
        return None
    rows, shards, size = int(manifest["rows"]), int(manifest["shards"]), int(manifest["shard_size"])
    owned = [k for k in range(shards) if k % num_shards == shard_id]
    for index in owned:
        record, _ = check_shard(folder, index, manifest["shard_format"])
        first = index * size
        if record is None or int(record["first_row"]) != first or int(record["rows"]) != min(size, rows - first):
            return None
    return rows, shards, len(owned), int(manifest.get("dim") or 0)


def _resume_note(folder: Path, shard_id: int, num_shards: int, shard_size: int) -> str | None:
    """Which shards of this split a rerun found finished, and where it restarts (None: none)."""
    import json

    done = [k for k in finished_shards(folder) if k % num_shards == shard_id]
    if not done:
        return None
    texts = 0
    for index in done:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # an unreadable record: the shard is redone, with a warning, when its turn comes
            texts += int(json.loads(record_path(folder, index).read_text(encoding="utf-8"))["rows"])
    restart = shard_id
    while restart in done:
        restart += num_shards
    manifest = read_manifest(folder) or {}
    total = manifest.get("shards")
    where = (
        "every shard was done; checking them against the model"
        if isinstance(total, int) and restart >= total
        else f"restarting at shard {restart} (row {restart * shard_size})"
    )
    return f"resumed: shards {_ranges(done)} ({texts} texts) were already done; {where}"


def _write_shard(folder: Path, index: int, first_row: int, ids: list[str], vectors: Any, fmt: str) -> None:
    """Write shard ``index``: its files atomically, then its record (the commit). A full disk is a
    :class:`DiskFullError` that says which shards are finished and intact."""
    try:
        _write_shard_files(folder, index, first_row, ids, vectors, fmt)
    except DiskFullError as exc:
        done = finished_shards(folder)
        kept = f"the {len(done)} finished shards ({_ranges(done)}) are intact" if done else "no shard is finished yet"
        raise DiskFullError(
            f"{exc} Shard {index} (rows {first_row}-{first_row + len(ids) - 1}) is not finished; {kept} in {folder}: "
            "free some space and rerun the same command to resume.",
            path=exc.path,
            requested=exc.requested,
            written=exc.written,
        ) from exc


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _write_shard_files(folder: Path, index: int, first_row: int, ids: list[str], vectors: Any, fmt: str) -> None:
    import json

    import numpy as np

    for stale in folder.glob(f".{shard_name(index)}.*.tmp"):  # a killed run's temporary files
        stale.unlink(missing_ok=True)
    record_path(folder, index).unlink(missing_ok=True)
    name = shard_name(index)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if fmt == "npy":
        atomic_write(folder / f"{name}.npy", lambda handle: np.save(handle, vectors), binary=True)
        atomic_write(folder / f"{name}.ids.json", lambda handle: handle.write(json.dumps(ids, ensure_ascii=False)))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        dim = vectors.shape[1]
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), type=pa.float32()), dim)
        table = pa.table({"id": pa.array(ids, type=pa.string()), "embedding": embedding})
        with atomic_path(folder / f"{name}.parquet") as tmp:
            pq.write_table(table, tmp)
    files = {file: file_digest(folder / file) for file in shard_files(index, fmt)}
    atomic_write_json(record_path(folder, index), {"shard": index, "first_row": first_row, "rows": len(ids), "dim": int(vectors.shape[1]), "files": files})


def _run(job: _Job, model: Any, worker: int, progress: Callable[[int], None] | None) -> tuple[int, int, int, int]:
    """Encode this worker's unfinished shards; (rows in the corpus, shards in it, encoded, reused)."""
    folder = Path(job.output_dir)
    rows = shards = encoded = reused = 0
    for chunk in iter_corpus(job.input, text_column=job.text_column, id_column=job.id_column, chunk_rows=job.shard_size):
        index = shards
        shards += 1
        rows += len(chunk)
        if not job.owns(index, worker):
            continue
        record, problem = check_shard(folder, index, job.shard_format)
        if record is not None and int(record["rows"]) == len(chunk) and int(record["first_row"]) == chunk.start:
            reused += 1
        else:
            if problem not in ("missing", ""):
                logger.warning("%s: shard %d is redone: %s", folder, index, problem)
            vectors = model.encode(chunk.texts, job.batch_size, normalize=job.normalize, role=job.role)
            if job.normalize and (message := zero_rows_message(vectors, first_row=chunk.start + 1, where=f"{job.input}: shard {index}: ")):
                logger.warning("%s", message)
            _write_shard(folder, index, chunk.start, chunk.ids, vectors, job.shard_format)
            encoded += 1
        if progress is not None:
            progress(len(chunk))
    return rows, shards, encoded, reused


def _load(job: _Job) -> Any:
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(job.model, **job.model_kwargs)


def _worker_main(job: _Job, worker: int, results: Any) -> None:
    """A worker process: load the model once, encode its shards, report (or report the error)."""
    try:
        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a spawned process has the defaults; its bars would interleave
        hf_logging.set_verbosity_error()  # the parent loaded the same model first and said what there was to say
        if job.threads:
            torch.set_num_threads(job.threads)
        results.put((worker, "ok", _run(job, _load(job), worker, None)))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
        try:
            results.put((worker, "error", exc))
        except Exception:  # an exception that does not pickle
            results.put((worker, "error", RuntimeError(f"{type(exc).__name__}: {exc}")))


def _run_workers(job: _Job) -> tuple[int, int, int, int]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_worker_main, args=(job, w, results), daemon=True) for w in range(job.workers)]
    for process in processes:
        process.start()
    totals = [0, 0, 0, 0]
    try:
        for _ in processes:
            while True:
                try:
                    worker, status, value = results.get(timeout=1.0)
                    break
                except Exception:  # queue.Empty: check that nobody died without a word
                    dead = [p for p in processes if p.exitcode not in (None, 0)]
                    if dead:
                        raise RuntimeError(f"encode worker {processes.index(dead[0])} died (exit code {dead[0].exitcode})") from None
            if status == "error":
                raise value
            rows, shards, encoded, reused = value
            totals = [rows, shards, totals[2] + encoded, totals[3] + reused]
        for process in processes:  # done: let them exit by themselves (a terminated process leaks its semaphores)
            process.join(timeout=60)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join(timeout=30)
        results.close()
        results.join_thread()
    return totals[0], totals[1], totals[2], totals[3]


@dataclass(frozen=True)
class EncodeRequest:
    """What :func:`encode_corpus` embeds and how: the corpus file ``input`` into shards under
    ``output_dir``.

    ``text_column``/``id_column``: the columns of a tabular corpus (default: ``text``, row
    numbers). ``shard_size`` records per shard, written as ``shard_format`` (``npy`` or
    ``parquet``). ``normalize`` defaults to the model's setting; ``role`` picks the model's query or
    document prompt. ``shard_id``/``num_shards``: this run does the shards ``k`` with ``k %
    num_shards == shard_id``. ``workers`` processes each load the model (by name) with
    ``model_kwargs``. ``show_progress``: a progress bar.
    """

    input: str | os.PathLike[str]
    output_dir: str | os.PathLike[str]
    text_column: str | None = None
    id_column: str | None = None
    shard_size: int = DEFAULT_CHUNK_ROWS
    shard_format: str = "npy"
    batch_size: int = DEFAULT_BATCH_SIZE
    normalize: bool | None = None
    role: str | None = None
    shard_id: int = 0
    num_shards: int = 1
    workers: int = 1
    model_kwargs: dict[str, Any] | None = None
    show_progress: bool = False


def encode_corpus(model: Any, request: EncodeRequest, say: Callable[[str], None] | None = None) -> EncodeReport:
    """Embed ``request.input`` into shards under ``request.output_dir`` (see the module doc and
    :class:`EncodeRequest`).

    ``model``: an :class:`~anglekit.model.embedder.Embedder`, or a name loaded with
    ``request.model_kwargs`` (needed for ``workers > 1``: each process loads it).

    A rerun says where it resumes (``say``, default: the log): the shards already done and the
    shard and row it restarts at. When the model is a local name whose files, the settings and
    the input are those of a finished encode whose shards are all intact, there is nothing to do:
    it returns at once, without loading the model.
    """
    if not isinstance(request, EncodeRequest):
        raise ConfigError(f"encode_corpus takes an EncodeRequest, got {type(request).__name__}")
    r = request
    text_column, id_column, shard_size, shard_format, batch_size = r.text_column, r.id_column, r.shard_size, r.shard_format, r.batch_size
    normalize, role, shard_id, num_shards, workers = r.normalize, r.role, r.shard_id, r.num_shards, r.workers
    started = time.perf_counter()
    _check_arguments(shard_size, shard_format, batch_size, shard_id, num_shards, workers, role)
    source = Path(os.fspath(r.input)).expanduser()
    folder = Path(os.fspath(r.output_dir)).expanduser()
    corpus_format(source)  # an unreadable format is refused before the model loads
    if not source.is_file():
        raise InputPathError("is a folder, not a file" if source.is_dir() else "no such file", source=os.fspath(r.input))
    if folder.resolve() == source.resolve() or folder.resolve() in source.resolve().parents:
        raise ConfigError(f"--output-dir {folder} would hold the input {source}; give another folder")
    kwargs = dict(r.model_kwargs or {})
    recorded = None
    if isinstance(model, (str, os.PathLike)):
        recorded = _request(os.fspath(model), kwargs, normalize, role, text_column, id_column, shard_size, shard_format, source)
        finished = _all_done(folder, recorded, shard_id, num_shards)
        if finished is not None:
            rows, shards, owned, dim = finished
            return EncodeReport(folder, rows, shards, 0, owned, dim, time.perf_counter() - started, loaded_model=False)
    from anglekit.model.embedder import Embedder

    if isinstance(model, Embedder):
        if workers > 1:
            raise ConfigError("workers > 1 needs the model's name (each process loads it), not an Embedder object")
        embedder, name = model, model.source
    else:
        name = os.fspath(model)
        embedder = Embedder.from_pretrained(name, **kwargs)
    normalize = embedder.config.normalize if normalize is None else bool(normalize)
    manifest = _manifest(embedder, name, source, text_column, id_column, role, normalize, shard_size, shard_format)
    resumed = _resume_note(folder, shard_id, num_shards, shard_size) if _prepare_folder(folder, manifest, embedder) else None
    if resumed is not None:
        (say or logger.info)(f"{folder}: {resumed}")
    threads = max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None
    job = _Job(os.fspath(source), os.fspath(folder), text_column, id_column, shard_size, shard_format, batch_size, normalize,
               role, shard_id, num_shards, workers, name, kwargs, threads)  # fmt: skip
    if workers > 1:
        del embedder  # each worker loads its own
        rows, shards, encoded, reused = _run_workers(job)
    else:
        rows, shards, encoded, reused = _run_here(job, embedder, r.show_progress)
    _finish_manifest(folder, rows, shards, recorded)
    return EncodeReport(folder, rows, shards, encoded, reused, int(manifest["dim"]), time.perf_counter() - started, resumed)


def _manifest(embedder: Any, name: str, source: Path, text_column: str | None, id_column: str | None, role: str | None, normalize: bool,
              shard_size: int, shard_format: str) -> dict[str, Any]:  # fmt: skip
    """The folder's manifest before any shard: input, columns, model (name, fingerprint, settings), prompt, layout."""
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "created_by": f"anglekit {__version__}", "input": corpus_signature(source),
        "columns": {"text": text_column, "id": id_column}, "model": name, "model_fingerprint": embedder.fingerprint(),
        "embedder_config": embedder.config.to_dict(), "role": role, "template": embedder.config.template(role),
        "normalize": normalize, "dim": int(getattr(embedder, "output_dim", embedder.dim)), "dtype": "float32",
        "shard_size": shard_size, "shard_format": shard_format, "rows": None, "shards": None,
    }  # fmt: skip


def _run_here(job: Any, embedder: Any, show_progress: bool) -> tuple[int, int, int, int]:
    """:func:`_run` in this process, with a progress bar when asked."""
    bar = None
    if show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc="encode", unit="text")
    try:
        return _run(job, embedder, 0, bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()


def _finish_manifest(folder: Path, rows: int, shards: int, request: dict[str, Any] | None) -> None:
    """Record the corpus's size (every split of it computes the same), once known, and the request
    that a rerun with nothing to do recognises."""

    manifest = read_manifest(folder)
    assert manifest is not None
    if manifest.get("rows") != rows or manifest.get("shards") != shards or manifest.get("request") != request:
        manifest.update(rows=rows, shards=shards, request=request)
        atomic_write_json(folder / MANIFEST, manifest)
