"""Search: an index of one model's document vectors, exact or HNSW, float or int8/binary codes.

>>> from anglekit.index import VectorIndex
>>> index = VectorIndex.build(model, ids, texts, quantize="int8", kind="hnsw")   # doctest: +SKIP
>>> index.search(["a query"], k=10)          # [[Hit(id, score, text), ...]]        # doctest: +SKIP
>>> index.delete(["doc-3"]); index.save("my-index")                               # doctest: +SKIP
>>> VectorIndex.load("my-index").search("another query")                          # doctest: +SKIP

:func:`build_index` builds one from a corpus file or from the shards of ``anglekit encode``;
:func:`anglekit.index.fingerprints.update_fingerprint` re-records an older anglekit's model
fingerprint in an index, shard folder or export (``anglekit fingerprint MODEL --update PATH``).
"""

from __future__ import annotations

from anglekit.index.build import build_index
from anglekit.index.store import INDEX_FILE, KINDS, Hit, IndexSettings, VectorIndex

__all__ = ["INDEX_FILE", "KINDS", "Hit", "IndexSettings", "VectorIndex", "build_index"]
