"""Corpora at scale: chunked reading of (id, text) files and sharded, resumable encoding.

- :func:`iter_corpus`: a .txt, .jsonl, .csv, .tsv or .parquet corpus in chunks, in constant memory;
- :func:`encode_corpus`: numbered shards (npy or Parquet, with ids) written atomically, resumable
  after a kill -9, split over machines (``shard_id``/``num_shards``) and processes (``workers``);
- :func:`open_shards`: the shards of a folder, each checked (missing or corrupt ones are named).
"""

from __future__ import annotations

from anglekit.corpus.encode import EncodeReport, EncodeRequest, encode_corpus
from anglekit.corpus.reader import CorpusChunk, iter_corpus
from anglekit.corpus.shards import ShardSet, open_shards

__all__ = ["CorpusChunk", "EncodeReport", "EncodeRequest", "ShardSet", "encode_corpus", "iter_corpus", "open_shards"]
