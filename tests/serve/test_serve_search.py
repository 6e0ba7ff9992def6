"""POST /v1/search: the same results as ``anglekit search`` on the same index, queries through the
batcher, indexes checked against the served model at start, bad requests answered 4xx with the
server still up, and the search metrics."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from anglekit.cli import main as cli_main
from anglekit.errors import ConfigError, DataError, ModelMismatchError

from serving import Running, error_of, sentences, start_server

DOCS = sentences(40, seed=7)
QUERIES = ["a man plays the guitar", "two dogs run in the park", "the market fell sharply today"]


def build_index(model: Any, folder: Path, **settings: Any) -> Path:
    from anglekit.index.store import VectorIndex

    index = VectorIndex.build(model, [f"d{i}" for i in range(len(DOCS))], DOCS, name=str(model.source), **settings)
    index.save(folder)
    return folder


@pytest.fixture(scope="module")
def indexes(reference: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("served-indexes")
    return {
        "exact": build_index(reference, root / "exact"),
        "int8": build_index(reference, root / "int8", quantize="int8"),
        "hnsw": build_index(reference, root / "hnsw", kind="hnsw", quantize="binary"),
    }


@pytest.fixture(scope="module")
def search_server(tiny_backend: Callable[..., Any], indexes: dict[str, Path]) -> Any:
    specs = tuple(f"{name}={folder}" for name, folder in indexes.items())
    with start_server(lambda: tiny_backend(), index=specs) as running:
        assert running.state.status == "ready", running.state.error
        yield running


def cli_search(folder: Path, queries: list[str], k: int, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert cli_main(["search", str(folder), *queries, "-k", str(k), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["exact", "int8", "hnsw"])
def test_search_returns_what_anglekit_search_returns(search_server: Running, indexes: dict[str, Path], name: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    expected = cli_search(indexes[name], QUERIES, 5, capsys)
    with httpx.Client(base_url=search_server.url, timeout=60) as client:
        response = client.post("/v1/search", json={"index": name, "query": QUERIES, "k": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list" and body["index"] == name and body["model"] == "tiny" and body["usage"]["prompt_tokens"] > 0
    assert [d["query"] for d in body["data"]] == QUERIES and [d["index"] for d in body["data"]] == [0, 1, 2]
    for got, want in zip(body["data"], expected, strict=False):
        assert [(r["rank"], r["id"], r["text"]) for r in got["results"]] == [(r["rank"], r["id"], r["text"]) for r in want["results"]]
        assert [r["score"] for r in got["results"]] == pytest.approx([r["score"] for r in want["results"]], abs=1e-5)


def test_one_string_and_concurrent_searches(search_server: Running, indexes: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    expected = {q: [r["id"] for r in cli_search(indexes["exact"], [q], 3, capsys)[0]["results"]] for q in QUERIES}
    answers: dict[int, Any] = {}

    def ask(i: int) -> None:
        q = QUERIES[i % len(QUERIES)]
        with httpx.Client(base_url=search_server.url, timeout=60) as client:
            answers[i] = (q, client.post("/v1/search", json={"index": "exact", "query": q, "k": 3}))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 24
    for q, response in answers.values():
        assert response.status_code == 200, response.text
        (entry,) = response.json()["data"]
        assert entry["query"] == q and [r["id"] for r in entry["results"]] == expected[q]


def test_the_index_may_be_left_out_when_one_is_served(tiny_backend: Callable[..., Any], indexes: dict[str, Path]) -> None:
    with start_server(lambda: tiny_backend(), index=(str(indexes["exact"]),)) as running, httpx.Client(base_url=running.url) as client:
        body = client.post("/v1/search", json={"query": "a dog", "k": 2}).json()
        assert body["index"] == "exact" and len(body["data"][0]["results"]) == 2  # named after its folder
        models = client.get("/v1/models").json()["data"][0]
        assert models["indexes"] == [{"name": "exact", "documents": len(DOCS), "kind": "exact", "quantize": "none"}]


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"query": "a dog"}, 404, "index", "index_not_found"),  # several served: name one
        ({"index": "nope", "query": "a dog"}, 404, "index", "index_not_found"),
        ({"index": 3, "query": "a dog"}, 400, "index", "invalid_request"),
        ({"index": "exact"}, 400, "query", "invalid_request"),
        ({"index": "exact", "query": ""}, 400, "query", "invalid_request"),
        ({"index": "exact", "query": "   "}, 400, "query", "invalid_request"),
        ({"index": "exact", "query": []}, 400, "query", "invalid_request"),
        ({"index": "exact", "query": ["ok", 5]}, 400, "query", "invalid_request"),
        ({"index": "exact", "query": {"q": "x"}}, 400, "query", "invalid_request"),
        ({"index": "exact", "query": "a", "k": 0}, 400, "k", "invalid_request"),
        ({"index": "exact", "query": "a", "k": -3}, 400, "k", "invalid_request"),
        ({"index": "exact", "query": "a", "k": "3"}, 400, "k", "invalid_request"),
        ({"index": "exact", "query": "a", "k": True}, 400, "k", "invalid_request"),
        ({"index": "exact", "query": "a", "k": 2.5}, 400, "k", "invalid_request"),
        ({"index": "exact", "query": "a", "k": len(DOCS) + 1}, 400, "k", "invalid_request"),  # beyond the corpus
        ({"index": "exact", "query": "a", "k": 10**9}, 400, "k", "invalid_request"),
        ({"index": "exact", "query": "a", "model": "other"}, 404, "model", "model_not_found"),
        ({"index": "exact", "query": "a", "top_k": 3}, 400, "top_k", "invalid_request"),
        ({"index": "exact", "query": ["q"] * 3000}, 400, "query", "invalid_request"),  # over --max-client-batch
    ],
)
def test_bad_search_requests_get_openai_errors_and_the_server_stays_up(
    search_server: Running, body: dict[str, Any], status: int, param: str, code: str
) -> None:
    with httpx.Client(base_url=search_server.url, timeout=60) as client:
        response = client.post("/v1/search", json=body)
        assert response.status_code == status, response.text
        error = error_of(response)
        assert error["param"] == param and error["code"] == code
        assert client.get("/health").status_code == 200
        assert client.post("/v1/search", json={"index": "exact", "query": "still up", "k": 1}).status_code == 200


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b'"a dog"', b"null"])
def test_malformed_search_bodies_are_400(search_server: Running, raw: bytes) -> None:
    response = httpx.post(f"{search_server.url}/v1/search", content=raw, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_request"


def test_a_server_without_an_index_says_how_to_serve_one(server: Running) -> None:
    response = httpx.post(f"{server.url}/v1/search", json={"query": "a dog"}, timeout=60)
    assert response.status_code == 404
    assert "--index" in error_of(response)["message"]


def test_search_metrics(search_server: Running) -> None:
    with httpx.Client(base_url=search_server.url, timeout=60) as client:
        assert client.post("/v1/search", json={"index": "int8", "query": ["one", "two"], "k": 2}).status_code == 200
        text = client.get("/metrics").text
    assert 'anglekit_search_duration_seconds_count{index="int8"}' in text
    assert 'anglekit_search_queries_total{index="int8"}' in text
    assert "anglekit_tokens_per_second " in text
    rate = float(next(line for line in text.splitlines() if line.startswith("anglekit_tokens_per_second ")).split()[1])
    assert rate > 0  # tokens were embedded within the last 10 s


# ------------------------------------------------------------------ refused at start


def failed_start(load: Callable[[], Any], **settings: Any) -> BaseException:
    with start_server(load, **settings) as running:
        assert running.state.status == "failed"
        assert running.state.error is not None
        return running.state.error


def test_an_index_of_another_model_or_other_settings_is_refused_at_start(
    tiny_backend: Callable[..., Any], indexes: dict[str, Path], tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from anglekit.model.embedder import Embedder

    other = build_index(Embedder.from_pretrained(tiny_llama_dir, device="cpu"), tmp_path / "llama")
    error = failed_start(lambda: tiny_backend(), index=(str(other),))
    assert isinstance(error, ModelMismatchError) and "fingerprint" in str(error)
    # the same weights with another setting (a prompt) embed differently: refused too
    error = failed_start(lambda: tiny_backend(prompt="query: {text}"), index=(str(indexes["exact"]),))
    assert isinstance(error, ModelMismatchError)


def test_bad_index_arguments_are_refused_at_start(tiny_backend: Callable[..., Any], indexes: dict[str, Path], reference: Any,
                                                  tmp_path: Path) -> None:  # fmt: skip
    from anglekit.index.store import VectorIndex

    error = failed_start(lambda: tiny_backend(), index=(f"a={indexes['exact']}", f"a={indexes['int8']}"))
    assert isinstance(error, ConfigError) and "two indexes are named 'a'" in str(error)
    error = failed_start(lambda: tiny_backend(), index=(str(tmp_path / "missing"),))
    assert isinstance(error, DataError) and "index.json" in str(error)
    VectorIndex.create(reference, name=str(reference.source)).save(tmp_path / "empty")
    error = failed_start(lambda: tiny_backend(), index=(str(tmp_path / "empty"),))
    assert isinstance(error, ConfigError) and "no documents" in str(error)


def test_serve_cli_takes_repeated_index_flags() -> None:
    from anglekit.cli import build_parser

    args = build_parser().parse_args(["serve", "model", "--index", "a=x", "--index", "y"])
    assert args.index == ["a=x", "y"] and args.model == "model"
    # one value per flag: MODEL after --index is the model, not a second index
    args = build_parser().parse_args(["serve", "--index", "a=x", "model"])
    assert args.index == ["a=x"] and args.model == "model"
    with pytest.raises(ConfigError, match="NAME=DIR"):
        from anglekit.serve.settings import ServeSettings

        ServeSettings(index=("docs=",))
