"""The search baseline of bench_serve_search.py: FastAPI + faiss over the same index, as one would
write it without anglekit's server: a sync endpoint (FastAPI's thread pool) that embeds the query
with ``Embedder.encode`` (the model's query prompt, normalised) and searches a ``faiss.IndexFlatIP``
of the index's own unit vectors.

    .venv/bin/python benchmarks/peers/fastapi_faiss.py MODEL_DIR INDEX_DIR --port N [--threads T]

Serves ``POST /v1/search`` (``query``: a string or strings, ``k``) with anglekit's response shape
(``data[i].results``: rank, id, score, text) and ``GET /health`` on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def build(model_dir: str, index_dir: str):  # noqa: ANN201 - a FastAPI app
    import faiss
    import numpy as np
    from fastapi import Body, FastAPI

    from anglekit import Embedder
    from anglekit.index.store import VectorIndex

    model = Embedder.from_pretrained(model_dir, device="cpu")
    stored = VectorIndex.load(index_dir)
    ids, texts = stored.ids, stored.texts
    flat = faiss.IndexFlatIP(stored.dim)
    flat.add(np.ascontiguousarray(stored.vectors, dtype=np.float32))
    model.encode(["warm up"], normalize=True, role="query")
    app = FastAPI()

    @app.post("/v1/search")
    def search(body: dict = Body(...)) -> dict:  # noqa: B008 - FastAPI's way
        queries = body["query"] if isinstance(body["query"], list) else [body["query"]]
        k = int(body.get("k", 10))
        vectors = model.encode(queries, normalize=True, role="query")
        scores, rows = flat.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        data = [
            {"index": i, "query": q, "results": [{"rank": r + 1, "id": ids[j], "score": float(s), "text": texts[j]}
                                                 for r, (j, s) in enumerate(zip(row, srow, strict=False)) if j >= 0]}
            for i, (q, row, srow) in enumerate(zip(queries, rows, scores, strict=False))
        ]  # fmt: skip
        return {"object": "list", "data": data}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("index")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0, help="torch and faiss threads (0: their defaults)")
    args = parser.parse_args()
    import faiss
    import torch
    import uvicorn

    if args.threads:
        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    uvicorn.run(build(args.model, args.index), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
