"""The baseline server of bench_serve.py: a plain FastAPI endpoint that calls ``Embedder.encode``
once per request, as one would write it without a batcher (a sync endpoint: FastAPI runs it on
its thread pool, so concurrent requests encode concurrently, each on its own).

    .venv/bin/python benchmarks/peers/plain_fastapi.py MODEL_DIR --port N [--threads T] [--name NAME]

Serves ``POST /v1/embeddings`` (``input``, ``model``, ``encoding_format`` float|base64) and
``GET /health`` on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import base64
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def build(model_dir: str, name: str):  # noqa: ANN201 - a FastAPI app
    from fastapi import Body, FastAPI

    from anglekit import Embedder

    model = Embedder.from_pretrained(model_dir, device="cpu")
    model.encode(["warm up"])
    app = FastAPI()

    @app.post("/v1/embeddings")
    def embeddings(body: dict = Body(...)) -> dict:  # noqa: B008 - FastAPI's way
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = model.encode(texts)
        rows = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors] if body.get("encoding_format") == "base64" else vectors.tolist()
        data = [{"object": "embedding", "embedding": row, "index": i} for i, row in enumerate(rows)]
        return {"object": "list", "data": data, "model": name, "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--name", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    import torch
    import uvicorn

    if args.threads:
        torch.set_num_threads(args.threads)
    uvicorn.run(build(args.model, args.name), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
