"""Build an index from a corpus file (read and embedded in chunks) or from ``anglekit encode`` shards."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError
from anglekit.index.store import VectorIndex
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.model.identity import ModelIdentity

__all__ = ["build_index"]


def build_index(
    model: Any,
    input: str | os.PathLike[str],  # noqa: A002 - the flag's name
    *,
    name: str | None = None,
    load: dict[str, Any] | None = None,
    text_column: str | None = None,
    id_column: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    chunk_rows: int = 10_000,
    progress: Callable[[int], None] | None = None,
    **settings: Any,
) -> VectorIndex:
    """An index of ``model`` (an Embedder) over ``input``: a corpus file (.txt, .jsonl, .csv, .tsv,
    .parquet with id and text columns), embedded ``chunk_rows`` at a time with the document prompt,
    or a folder of shards written by ``anglekit encode --output-dir`` with this model and its
    document prompt (checked, then read without embedding again). ``settings``: see
    :class:`~anglekit.index.store.IndexSettings`; ``progress(n)`` is called after each chunk."""
    from anglekit.corpus.reader import iter_corpus
    from anglekit.corpus.shards import open_shards, read_manifest

    index = VectorIndex.create(model, name=name, load=load, **settings)
    source = Path(os.fspath(input)).expanduser()
    if source.is_dir() and read_manifest(source) is not None:
        if text_column or id_column:
            raise ConfigError("--column and --id-column apply to corpus files; shards carry their ids")
        shards = open_shards(source)
        recorded = shards.manifest
        identity = ModelIdentity(model, current=index.model_info["fingerprint"])
        identity.check(
            recorded.get("model_fingerprint"), what=f"{source}: encoded by {recorded.get('model')}", path=source,
            advice="build the index from shards this model encoded, or from the corpus",
        )  # fmt: skip
        role = model.config.role_if_present("document")  # the document role when the model has one
        template = model.config.template(role)
        if recorded.get("template") != template:
            raise ConfigError(
                f"{source}: encoded with the prompt {recorded.get('template')!r}, but documents of an index take the "
                f"model's document prompt {template!r}; encode {f'with --role {role}' if role else 'without --role'}"
            )
        for ids, vectors in shards:
            index.add_vectors(ids, vectors)
            if progress is not None:
                progress(len(ids))
        return index
    for chunk in iter_corpus(source, text_column=text_column, id_column=id_column, chunk_rows=chunk_rows):
        seen: set[str] = set()
        for offset, ident in enumerate(chunk.ids):
            if ident in index or ident in seen:
                raise DataError(f"duplicate id {ident!r} (record {chunk.start + offset + 1}); ids must be unique", source=os.fspath(input))
            seen.add(ident)
        index.add(chunk.ids, chunk.texts, batch_size=batch_size)
        if progress is not None:
            progress(len(chunk))
    return index
