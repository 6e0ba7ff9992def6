"""GET / (the page) and GET /v1/info over HTTP: the page's files ship with the package and load
nothing from elsewhere, --no-ui turns them off, /v1/info describes the served model and indexes
(503 while loading, 401 without the key). The page in a browser: test_serve_ui_browser.py."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from anglekit.cli import main as cli_main
from anglekit.serve.app import ROUTES, UI_FILES

from serving import Running, error_of, sentences, start_server, wait_for

SRC_UI = Path(__file__).resolve().parents[2] / "src" / "anglekit" / "serve" / "ui"


def build_index(model: Any, folder: Path, docs: list[str], **settings: Any) -> Path:
    from anglekit.index.store import VectorIndex

    VectorIndex.build(model, [f"d{i}" for i in range(len(docs))], docs, name=str(model.source), **settings).save(folder)
    return folder


@pytest.fixture(scope="module")
def ui_server(tiny_backend: Callable[..., Any], reference: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("ui-indexes")
    docs = sentences(12, seed=5)
    specs = (f"docs={build_index(reference, root / 'docs', docs)}", f"small={build_index(reference, root / 'small', docs[:3], quantize='int8')}")
    with start_server(lambda: tiny_backend(), index=specs, api_key="k3y") as running:
        assert running.state.status == "ready", running.state.error
        yield running


def test_the_page_and_its_files_are_served_with_a_policy_that_allows_only_this_server(ui_server: Running) -> None:
    with httpx.Client(base_url=ui_server.url, timeout=60) as client:
        for path, (name, media_type) in UI_FILES.items():
            response = client.get(path)  # no key needed for the page itself
            assert response.status_code == 200, (path, response.text)
            assert response.headers["content-type"] == media_type
            assert response.content == (SRC_UI / name).read_bytes()
            policy = response.headers["content-security-policy"]
            assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "script-src 'self'" in policy
            assert path in ROUTES


def test_the_page_references_only_its_own_files() -> None:
    html = (SRC_UI / "index.html").read_text(encoding="utf-8")
    linked = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert sorted(linked) == ["ui/app.js", "ui/style.css"]
    for name in ("index.html", "app.js", "style.css"):
        text = (SRC_UI / name).read_text(encoding="utf-8")
        assert not re.search(r"https?://|//cdn|@import", text), name
    script = (SRC_UI / "app.js").read_text(encoding="utf-8")
    called = set(re.findall(r'call\("(?:GET|POST)", "([^"]+)"', script))
    assert called == {"v1/info", "v1/embeddings", "v1/search"}


def test_the_package_data_ships_the_page() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["anglekit"]
    shipped = {p.name for pattern in patterns if pattern.startswith("serve/ui/") for p in SRC_UI.glob(pattern.removeprefix("serve/ui/"))}
    assert shipped == {name for name, _ in UI_FILES.values()}


def test_info_describes_the_model_and_every_served_index(ui_server: Running, reference: Any) -> None:
    with httpx.Client(base_url=ui_server.url, timeout=60, headers={"Authorization": "Bearer k3y"}) as client:
        info = client.get("/v1/info").json()
    assert info["object"] == "info" and info["model"] == "tiny"
    assert info["dimensions"] == reference.dim and info["max_input_tokens"] == reference.config.max_length
    assert info["layers"] is None and info["normalize"] is False
    assert info["encoding_formats"] == ["float", "base64", "int8", "uint8", "binary", "ubinary"]
    assert info["max_client_batch"] == 2048 and info["auto_truncate"] is True and info["max_k"] == 10_000
    assert info["indexes"] == [
        {"name": "docs", "documents": 12, "kind": "exact", "quantize": "none", "max_k": 12},
        {"name": "small", "documents": 3, "kind": "exact", "quantize": "int8", "max_k": 3},
    ]


@pytest.mark.parametrize("header", [None, "Bearer wrong"])
def test_info_needs_the_key_when_the_server_has_one(ui_server: Running, header: str | None) -> None:
    with httpx.Client(base_url=ui_server.url, timeout=60) as client:
        response = client.get("/v1/info", headers={"Authorization": header} if header else {})
    assert response.status_code == 401
    assert "API key" in error_of(response)["message"]


def test_info_is_503_while_the_model_loads(tiny_backend: Callable[..., Any]) -> None:
    release = threading.Event()

    def slow_load() -> Any:
        assert release.wait(60)
        return tiny_backend()

    with start_server(slow_load, wait_ready=False) as running, httpx.Client(base_url=running.url, timeout=60) as client:
        response = client.get("/v1/info")
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert "still loading" in error_of(response)["message"]
        assert client.get("/").status_code == 200  # the page is there at once; it waits for the model itself
        release.set()
        wait_for(lambda: running.state.status == "ready", what="the model to load")
        assert client.get("/v1/info").json()["indexes"] == []


def test_no_ui_answers_404_on_the_page_and_keeps_the_api(tiny_backend: Callable[..., Any]) -> None:
    with start_server(lambda: tiny_backend(), ui=False) as running, httpx.Client(base_url=running.url, timeout=60) as client:
        for path in UI_FILES:
            response = client.get(path)
            assert response.status_code == 404
            assert error_of(response)["message"] == f"no route GET {path}; see GET /openapi.json"
        assert client.get("/v1/info").status_code == 200


def test_the_page_answers_only_get(ui_server: Running) -> None:
    with httpx.Client(base_url=ui_server.url, timeout=60) as client:
        response = client.post("/", json={})
    assert response.status_code == 405 and response.headers["allow"] == "GET"


def test_the_flag_is_in_the_help_and_wrongly_typed_values_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main(["serve", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "--ui, --no-ui" in out and "GET /" in out
    with pytest.raises(SystemExit) as exited:
        cli_main(["serve", "model", "--no-ui=yes"])
    assert exited.value.code == 2
    assert "--no-ui" in capsys.readouterr().err


def test_the_setting_is_typed() -> None:
    from anglekit.errors import ConfigError
    from anglekit.serve.settings import ServeSettings

    assert ServeSettings().ui is True and ServeSettings(ui=False).ui is False
    with pytest.raises(ConfigError, match="ui"):
        ServeSettings(ui="no")  # type: ignore[arg-type]
