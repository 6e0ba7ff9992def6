"""Model names that are missing paths fail at once and say so; hub ids are looked up with one
bounded request; safetensors weights are preferred over a stray ``.bin`` beside them."""

from __future__ import annotations

import http.server
import logging
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.model import location
from anglekit.model.embedder import Embedder
from anglekit.model.loading import inspect_model


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything asks the hub."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(location, "probe_hub", refuse)


@pytest.mark.parametrize("name", ["./runs/doesnotexist", "../runs/doesnotexist", "runs/a/doesnotexist", "~/doesnotexist-anglekit", "missing.gguf"])
def test_a_missing_path_fails_at_once_naming_it(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_hub: None) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for load in (lambda: Embedder.from_pretrained(name, device="cpu"), lambda: inspect_model(name)):
        with pytest.raises(ConfigError, match="not a model directory .no such folder or file") as caught:
            load()
        assert str(caught.value).startswith(name)
        expanded = Path(name.replace("~", str(tmp_path / "home"), 1))
        assert str((tmp_path / expanded).absolute() if not expanded.is_absolute() else expanded) in str(caught.value)


def test_a_hub_shaped_name_offline_and_not_cached_says_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_hub: None) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    for load in (lambda: Embedder.from_pretrained("runs/doesnotexist", device="cpu"), lambda: inspect_model("runs/doesnotexist")):
        with pytest.raises(ConfigError) as caught:
            load()
        message = str(caught.value)
        assert f"no such local folder ({tmp_path / 'runs' / 'doesnotexist'})" in message
        assert "not found on the hub" in message and "HF_HUB_OFFLINE" in message


def test_a_cached_hub_id_offline_passes_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_hub: None) -> None:
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "hub-cache"
    (cache / "models--org--name" / "snapshots" / "0123").mkdir(parents=True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    assert location.check_model_location("org/name") == "org/name"
    with pytest.raises(ConfigError, match="not found on the hub"):
        location.check_model_location("org/other")


def test_relative_and_home_folders_load(tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_hub: None) -> None:
    shutil.copytree(tiny_bert_dir, tmp_path / "runs" / "m")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    reference = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(["a b c"])
    for name in ("runs/m", "./runs/m", "~/runs/m"):
        np.testing.assert_allclose(Embedder.from_pretrained(name, device="cpu").encode(["a b c"]), reference, rtol=1e-5, atol=1e-6)
        assert inspect_model(name).hidden_size == 32


class _CountingHub(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []
    status = 404

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).requests.append(self.path)
        body = b"{}"
        self.send_response(type(self).status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub switched on (for location's own check), with an empty cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def local_hub(monkeypatch: pytest.MonkeyPatch, online: None) -> Iterator[type[_CountingHub]]:
    handler = type("Hub", (_CountingHub,), {"requests": [], "status": 404})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def test_an_unknown_hub_id_is_one_request_and_names_both(local_hub: type[_CountingHub], tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        inspect_model("runs/doesnotexist")
    message = str(caught.value)
    assert f"no such local folder ({tmp_path / 'runs' / 'doesnotexist'})" in message
    assert "not found on the hub" in message and "HTTP 404" in message
    assert local_hub.requests == ["/api/models/runs/doesnotexist"]  # one request, no retries
    local_hub.status = 200
    assert location.check_model_location("runs/doesnotexist", revision="v1") == "runs/doesnotexist"
    assert local_hub.requests[-1] == "/api/models/runs/doesnotexist/revision/v1"


def test_an_unreachable_hub_fails_without_retrying(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the connection is refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(ConfigError) as caught:
        Embedder.from_pretrained("runs/doesnotexist", device="cpu")
    message = str(caught.value)
    assert "no such local folder" in message and "not found on the hub" in message and "unreachable" in message


def test_safetensors_is_preferred_over_a_stray_incomplete_bin(
    tiny_bert_dir: Path,
    copy_model,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    folder = copy_model(tiny_bert_dir)
    assert (folder / "model.safetensors").is_file()
    (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04 truncated")  # an interrupted copy
    reference = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="fp32").encode(["a b c"])
    with caplog.at_level(logging.WARNING, logger="anglekit.model.checks"):
        model = Embedder.from_pretrained(folder, device="cpu", dtype="fp32")
    np.testing.assert_allclose(model.encode(["a b c"]), reference, rtol=1e-5, atol=1e-6)
    assert any("ignoring pytorch_model.bin" in r.getMessage() and str(folder) in r.getMessage() for r in caplog.records)
    assert inspect_model(str(folder)).hidden_size == 32
    # Without the safetensors file the incomplete .bin is what would load: refused, named.
    (folder / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="pytorch_model.bin: not a complete PyTorch archive"):
        Embedder.from_pretrained(folder, device="cpu")
    # A complete .bin alone still loads, to the same vectors.
    state = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="fp32").backbone.state_dict()
    torch.save(state, folder / "pytorch_model.bin")
    np.testing.assert_allclose(Embedder.from_pretrained(folder, device="cpu", dtype="fp32").encode(["a b c"]), reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", ["soon", "0", "-1", "nan"])
def test_a_bad_hub_timeout_is_named(bad: str, online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANGLEKIT_HUB_TIMEOUT", bad)
    with pytest.raises(ConfigError, match="ANGLEKIT_HUB_TIMEOUT"):
        location.check_model_location("org/name")
