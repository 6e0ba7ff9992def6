"""``anglekit export`` and pushing to the hub. Pushing cannot run offline: huggingface_hub's
``HfApi`` is replaced at that boundary by a recorder, and the tests check the calls it gets
(repository, folder, files, privacy); with the real ``HfApi`` offline, the push fails clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ExportError
from anglekit.model.config import CONFIG_NAME
from anglekit.model.embedder import Embedder

import helpers

st = pytest.importorskip("sentence_transformers")

TEXTS = ["a man is playing the guitar .", "dog", " ".join(["two kids ride their bikes down the hill"] * 20)]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return helpers.run_cli(argv, capsys)


class FakeHfApi:
    """Records what anglekit asks of huggingface_hub's HfApi (and the files at upload time)."""

    calls: list[tuple[str, dict[str, Any]]] = []
    fail: Exception | None = None

    def __init__(self, token: str | None = None) -> None:
        self.calls.append(("init", {"token": token}))

    def create_repo(self, **kwargs: Any) -> str:
        self.calls.append(("create_repo", kwargs))
        return f"https://huggingface.co/{kwargs['repo_id']}"

    def upload_folder(self, **kwargs: Any) -> Any:
        if self.fail is not None:
            raise self.fail
        files = sorted(str(p.relative_to(kwargs["folder_path"])) for p in Path(kwargs["folder_path"]).rglob("*") if p.is_file())
        self.calls.append(("upload_folder", {**kwargs, "files": files}))

        class Commit:
            commit_url = f"https://huggingface.co/{kwargs['repo_id']}/commit/abc123"

        return Commit()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> type[FakeHfApi]:
    import huggingface_hub

    FakeHfApi.calls = []
    FakeHfApi.fail = None
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    return FakeHfApi


def test_cli_export_writes_a_folder_sentence_transformers_loads(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", max_length=20, normalize=True, device="cpu").save_pretrained(tmp_path / "model")
    out = tmp_path / "st"
    code, stdout, err = _run(["export", str(saved), "--format", "sentence-transformers", "--output-dir", str(out)], capsys)
    assert code == 0, err
    assert f"exported {saved} to {out}" in stdout and "max difference" in stdout and "trust_remote_code" not in stdout
    ours = Embedder.from_pretrained(saved, device="cpu").encode(TEXTS)
    theirs = st.SentenceTransformer(str(out), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)

    code, _, err = _run(["export", str(saved), "--format", "sentence-transformers", "--output-dir", str(out)], capsys)
    assert code == 2 and "not empty" in err and "Traceback" not in err
    code, _, err = _run(["export", str(saved), "--format", "sentence-transformers", "--output-dir", str(out), "--overwrite", "--quiet"], capsys)
    assert code == 0, err


def test_cli_export_custom_module_says_so(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = Embedder.from_pretrained(tiny_bert_dir, pooling="cls_avg", device="cpu").save_pretrained(tmp_path / "model")
    code, stdout, err = _run(["export", str(saved), "--format", "sentence-transformers", "--output-dir", str(tmp_path / "st")], capsys)
    assert code == 0, err
    assert "trust_remote_code=True" in stdout


def test_cli_export_errors_are_one_line(tiny_llama_dir: Path, tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["export", str(tiny_bert_dir), "--format", "tflite", "--output-dir", str(tmp_path / "x")], capsys)
    assert code == 2 and "invalid choice: 'tflite'" in err
    code, _, err = _run(["export", str(tiny_bert_dir), "--output-dir", str(tmp_path / "x")], capsys)
    assert code == 2 and "--format" in err
    saved = Embedder.from_pretrained(tiny_llama_dir, bidirectional=True, device="cpu").save_pretrained(tmp_path / "bidi")
    code, _, err = _run(["export", str(saved), "--format", "sentence-transformers", "--output-dir", str(tmp_path / "st")], capsys)
    assert code == 2 and "bidirectional" in err and "Traceback" not in err
    assert not (tmp_path / "st").exists()
    code, _, err = _run(["export", str(tmp_path / "missing"), "--format", "sentence-transformers", "--output-dir", str(tmp_path / "st")], capsys)
    assert code == 2 and "missing" in err


def test_cli_push_to_hub_uploads_the_exported_folder(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], hub: type[FakeHfApi]) -> None:
    out = tmp_path / "st"
    argv = ["export", str(tiny_bert_dir), "--format", "sentence-transformers", "--output-dir", str(out), "--push-to-hub", "me/my-model", "--private"]
    code, stdout, err = _run(argv, capsys)
    assert code == 0, err
    names = [name for name, _ in hub.calls]
    assert names == ["init", "create_repo", "upload_folder"]
    create, upload = hub.calls[1][1], hub.calls[2][1]
    assert create == {"repo_id": "me/my-model", "repo_type": "model", "private": True, "exist_ok": True}
    assert upload["repo_id"] == "me/my-model" and upload["repo_type"] == "model" and upload["folder_path"] == str(out)
    assert {"modules.json", "1_Pooling/config.json", "model.safetensors", "README.md", CONFIG_NAME} <= set(upload["files"])
    assert "pushed to https://huggingface.co/me/my-model/commit/abc123" in stdout


def test_push_of_an_embedder_exports_it_first(tiny_bert_dir: Path, hub: type[FakeHfApi]) -> None:
    from anglekit.export import push_to_hub

    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    url = push_to_hub(embedder, "me/model", token="hf_secret")
    assert url.endswith("/commit/abc123")
    assert hub.calls[0] == ("init", {"token": "hf_secret"})
    upload = hub.calls[-1][1]
    assert "modules.json" in upload["files"] and "sentence_bert_config.json" in upload["files"]
    assert not Path(upload["folder_path"]).exists()  # the scratch export is gone


def test_push_failures_are_export_errors(tiny_bert_dir: Path, tmp_path: Path, hub: type[FakeHfApi]) -> None:
    from anglekit.export.hub import push_folder

    with pytest.raises(ExportError, match="owner/name"):
        push_folder(tiny_bert_dir, "a/b/c")
    with pytest.raises(ExportError, match="nothing to upload"):
        push_folder(tmp_path / "missing", "me/model")
    hub.fail = RuntimeError("401 Unauthorized")
    with pytest.raises(ExportError, match="me/model.*401 Unauthorized"):
        push_folder(tiny_bert_dir, "me/model")


def test_push_cannot_run_offline(tiny_bert_dir: Path) -> None:
    """With the real huggingface_hub and HF_HUB_OFFLINE=1 (set for every test), the push fails clearly."""
    from anglekit.export.hub import push_folder

    with pytest.raises(ExportError, match="push of .* failed"):
        push_folder(tiny_bert_dir, "me/model", token="hf_not_a_real_token")


def test_export_help_lists_the_formats(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = _run(["export", "--help"], capsys)
    assert code == 0
    assert "--format {onnx,openvino,sentence-transformers}" in stdout and "--push-to-hub REPO" in stdout and "--output-dir DIR" in stdout
    code, stdout, _ = _run(["--help"], capsys)
    assert "export" in stdout


def test_exported_config_keeps_the_anglekit_settings(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = Embedder.from_pretrained(tiny_bert_dir, pooling="first_last_avg", max_length=16, device="cpu").save_pretrained(tmp_path / "m")
    code, _, err = _run(["export", str(saved), "--format", "sentence-transformers", "--output-dir", str(tmp_path / "st"), "--quiet"], capsys)
    assert code == 0, err
    config = json.loads((tmp_path / "st" / CONFIG_NAME).read_text())
    assert config["pooling"] == "first_last_avg" and config["max_length"] == 16


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["same", "inside", "parent", "symlink-to-source", "source-via-symlink", "dot-dot"])
def test_export_never_writes_into_its_source(where: str, tiny_bert_dir: Path, tmp_path: Path, copy_model: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """--output-dir naming the model's folder, a folder inside it or one holding it (symlinks resolved)
    is refused with --overwrite too, and the model is left byte for byte as it was."""
    source = copy_model(tiny_bert_dir, "models/mine")
    before = _tree(source)
    model_arg, output = str(source), source
    if where == "inside":
        output = source / "exported"
    elif where == "parent":
        output = source.parent
    elif where == "symlink-to-source":
        output = tmp_path / "link"
        output.symlink_to(source, target_is_directory=True)
    elif where == "source-via-symlink":
        link = tmp_path / "model-link"
        link.symlink_to(source, target_is_directory=True)
        model_arg = str(link)
    elif where == "dot-dot":
        output = source / ".." / "mine"
    code, _, err = _run(["export", model_arg, "--format", "sentence-transformers", "--output-dir", str(output), "--overwrite"], capsys)
    assert code == 2 and err.count("\n") == 1 and "never writes into its source" in err and str(output) in err, err
    assert _tree(source) == before
    assert not (source / "exported").exists()


def test_export_of_an_embedder_refuses_its_own_folder(tiny_bert_dir: Path, copy_model: Any, tmp_path: Path) -> None:
    from anglekit.export import export

    source = copy_model(tiny_bert_dir, "own")
    before = _tree(source)
    embedder = Embedder.from_pretrained(str(source), device="cpu")
    with pytest.raises(ExportError, match="is the model being exported"):
        export(embedder, "sentence-transformers", source, overwrite=True)
    assert _tree(source) == before
    sibling = export(embedder, "sentence-transformers", tmp_path / "sibling", verify=False)  # beside it is fine
    assert sibling.folder.is_dir() and _tree(source) == before


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--private"], "private (--private) applies only when uploading"),
        (["--push-to-hub", "  "], "must name a hub repository"),
        (["--push-to-hub", ""], "must name a hub repository"),
    ],
)
def test_upload_options_without_an_upload_are_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], words: str
) -> None:
    out = tmp_path / "out"
    code, _, err = _run(["export", str(tiny_bert_dir), "--format", "sentence-transformers", "--output-dir", str(out), *flags], capsys)
    assert code == 2 and words in err and err.count("\n") == 1 and not out.exists(), err


def test_api_token_without_push_is_refused(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.export import export

    with pytest.raises(ExportError, match="token applies only when uploading"):
        export(str(tiny_bert_dir), "sentence-transformers", tmp_path / "out", token="hf_x")
    assert not (tmp_path / "out").exists()


def test_a_runtime_graph_may_go_into_a_new_subfolder_of_its_model(tiny_bert_dir: Path, copy_model: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """onnx/openvino exports may be written into the model's folder (where anglekit serve finds an
    int8 one): into a new subfolder, or over an earlier export of the format; never over another
    subfolder of the model, and the model's own files are left as they were."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    source = copy_model(tiny_bert_dir, "models/with-graph")
    before = _tree(source)
    code, _, err = _run(["export", str(source), "--format", "onnx", "--quantize", "int8", "--output-dir", str(source / "onnx-int8")], capsys)
    assert code == 0, err
    assert (source / "onnx-int8" / "model.onnx").is_file() and (source / "onnx-int8" / "onnx_config.json").is_file()
    code, _, err = _run(["export", str(source), "--format", "onnx", "--quantize", "int8", "--output-dir", str(source / "onnx-int8"), "--overwrite"], capsys)
    assert code == 0, err  # an earlier export of the format is replaced
    (source / "notes").mkdir()
    (source / "notes" / "keep.txt").write_text("mine")
    code, _, err = _run(["export", str(source), "--format", "onnx", "--output-dir", str(source / "notes"), "--overwrite"], capsys)
    assert code == 2 and "never writes into its source" in err, err
    assert (source / "notes" / "keep.txt").read_text() == "mine"
    assert {k: v for k, v in _tree(source).items() if not k.startswith(("onnx-int8", "notes"))} == before
