"""anglekit: train, evaluate and serve angle-optimized (AnglE) text embeddings.

The root holds the public API only: :class:`Embedder` (from :mod:`anglekit.model`), the errors
(:mod:`anglekit.errors`) and the version. Everything else lives in a package named for its concept:

- ``model``: the Embedder, its typed settings, loading (hub, folders, GGUF, LoRA), pooling, backends
- ``data``: records, readers and sources, the catalogue of known datasets
- ``losses``: the objectives (ranking core, cosine, angle, in-batch negatives, contrastive) and their registry
- ``training``: typed training config, tasks, the trainer and its callbacks
- ``llm``: decoder backbones: prompts, LoRA, GGUF, bidirectional attention, k-bit loading
- ``metrics``: scores from vectors: pair cosine and Spearman, retrieval ranking and nDCG/MRR/recall/MAP
- ``evaluation``: the papers' suites (STS, transfer, retrieval, geometry), reports
- ``reproduce``: the papers' tables as resumable cells with seeds and paired statistics
- ``adapt``: documents in, retriever out: generated queries, a teacher, training, merging, in resumable stages
- ``generation``: training pairs written by LLMs
- ``github_issues``: the long-text GitHub issues dataset
- ``export``: sentence-transformers, ONNX and OpenVINO folders, the hub
- ``serve``: the OpenAI-compatible HTTP server with dynamic batching
- ``corpus``: corpora at scale: chunked reading, sharded resumable encoding
- ``index``: search indexes (exact, HNSW; float, int8, binary)
- ``mining``: hard negatives for (query, positive) pairs mined from a corpus with anglekit's indexes
- ``scale``: adapters for other engines (Ray Data, Spark)
- ``config``: typed settings and their metadata, from which the flags are generated
- ``io``: atomic writes, what counts as a blank text
- ``plugins``: the one registry shape (objectives, backends, export formats, eval suites) and entry points
- ``cli``: the command line, one module per command
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anglekit.errors import AnglekitError, ConfigError, DataError, UnsupportedModelError
from anglekit.version import __version__

__all__ = ["AnglekitError", "ConfigError", "DataError", "Embedder", "UnsupportedModelError", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from anglekit.model.embedder import Embedder


def __getattr__(name: str) -> Any:
    # Lazy so that `import anglekit` (and `anglekit --help`) does not pay for torch/transformers.
    if name == "Embedder":
        from anglekit.model.embedder import Embedder

        return Embedder
    raise AttributeError(f"module 'anglekit' has no attribute {name!r}")
