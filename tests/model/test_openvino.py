"""The OpenVINO backend: exported IR (fp32, int8 weights, static int8 of weights and activations)
and ONNX folders compiled by OpenVINO embed like the torch model; folders are chosen automatically;
bad folders and options fail clearly."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openvino")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from anglekit.errors import ConfigError  # noqa: E402
from anglekit.model.embedder import Embedder  # noqa: E402
from anglekit.model.onnx import FP32_TOLERANCE, INT8_MIN_COSINE, OnnxEmbedder, export_onnx  # noqa: E402
from anglekit.model.openvino import OPENVINO_CONFIG, OPENVINO_FILE, OpenVinoEmbedder, export_openvino, is_openvino_folder  # noqa: E402

from helpers import row_cosines

TEXTS = [
    "a man is playing the guitar .",
    "dog",
    "the old woman walks her small white dog in the park every morning .",
    "two kids ride bikes " * 20,
    "i can not eat bread today !",
]


@pytest.fixture(scope="module")
def bert(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Embedder, Path]:
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="cls_avg", max_length=32, device="cpu")
    return model, export_openvino(model, tmp_path_factory.mktemp("ov") / "fp32")


def test_fp32_openvino_equals_torch_and_the_folder_loads_on_its_own(bert: tuple[Embedder, Path]) -> None:
    model, folder = bert
    assert is_openvino_folder(folder) and (folder / "openvino_model.bin").is_file()
    assert not any(folder.glob("*.safetensors")) and not (folder / "model.onnx").exists()
    info = json.loads((folder / OPENVINO_CONFIG).read_text())
    assert info["quantize"] is None and info["check"]["max_abs_difference"] <= FP32_TOLERANCE
    loaded = Embedder.from_pretrained(folder)  # only OpenVINO weights there: the OpenVINO backend
    assert isinstance(loaded, OpenVinoEmbedder) and loaded.backend == "openvino" and loaded.dim == model.dim
    for normalize in (False, True):
        np.testing.assert_allclose(loaded.encode(TEXTS, 2, normalize=normalize), model.encode(TEXTS, 2, normalize=normalize), atol=FP32_TOLERANCE)
    assert loaded.encode("dog").shape == (model.dim,) and loaded.encode([]).shape == (0, model.dim)
    assert loaded.fingerprint() == OpenVinoEmbedder.from_pretrained(folder).fingerprint()


def test_an_onnx_folder_runs_under_openvino_with_the_same_vectors(bert: tuple[Embedder, Path], tmp_path: Path) -> None:
    model, _ = bert
    onnx_folder = export_onnx(model, tmp_path / "onnx")
    under_ov = Embedder.from_pretrained(onnx_folder, backend="openvino", normalize=True)
    assert isinstance(under_ov, OpenVinoEmbedder)
    np.testing.assert_allclose(under_ov.encode(TEXTS), OnnxEmbedder.from_pretrained(onnx_folder, normalize=True).encode(TEXTS), atol=FP32_TOLERANCE)
    assert isinstance(Embedder.from_pretrained(onnx_folder), OnnxEmbedder) and not isinstance(Embedder.from_pretrained(onnx_folder), OpenVinoEmbedder)


def test_int8_weights_stay_within_the_stated_cosine(bert: tuple[Embedder, Path], tmp_path: Path) -> None:
    model, _ = bert
    folder = export_openvino(model, tmp_path / "int8", quantize="int8")
    info = json.loads((folder / OPENVINO_CONFIG).read_text())
    assert info["quantize"] == "int8" and info["check"]["min_cosine"] >= INT8_MIN_COSINE
    assert (folder / "openvino_model.bin").stat().st_size < (bert[1] / "openvino_model.bin").stat().st_size
    assert row_cosines(OpenVinoEmbedder.from_pretrained(folder).encode(TEXTS), model.encode(TEXTS)).min() >= INT8_MIN_COSINE


CALIBRATION = [f"sentence number {i} about a {w} in the park ." for i, w in enumerate(["dog", "cat", "man", "woman", "kid", "bike"] * 8)]


def test_static_int8_quantizes_activations_within_the_stated_cosine(bert: tuple[Embedder, Path], tmp_path: Path) -> None:
    import openvino as ov

    model, _ = bert
    folder = export_openvino(model, tmp_path / "static", quantize="int8-static", calibration_texts=CALIBRATION)
    info = json.loads((folder / OPENVINO_CONFIG).read_text())
    assert info["quantize"] == "int8-static" and info["calibration_texts"] == len(CALIBRATION)
    assert "activations" in info["weights"] and info["check"]["min_cosine"] >= INT8_MIN_COSINE
    # Activations are quantized: the graph carries FakeQuantize nodes on the inputs of its MatMuls.
    ops = {op.get_type_name() for op in ov.Core().read_model(folder / OPENVINO_FILE).get_ops()}
    assert "FakeQuantize" in ops
    loaded = Embedder.from_pretrained(folder)
    assert isinstance(loaded, OpenVinoEmbedder)
    assert row_cosines(loaded.encode(TEXTS), model.encode(TEXTS)).min() >= INT8_MIN_COSINE


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"quantize": "int8-static"}, "needs calibration texts"),
        ({"quantize": "int8-static", "calibration_texts": []}, "calibration texts are empty"),
        ({"quantize": "int8-static", "calibration_texts": "one string"}, "needs calibration texts"),
        ({"quantize": "int8-static", "calibration_texts": ["fine", 3]}, "calibration text 1 is int"),
        ({"quantize": "int8-static", "calibration_texts": ["fine", "  "]}, "calibration text 1"),
        ({"quantize": "int8-static", "calibration_texts": ["x"] * 5000}, "at most 4096"),
        ({"quantize": "int8", "calibration_texts": ["x"]}, "for quantize='int8-static' only"),
        ({"calibration_texts": ["x"]}, "for quantize='int8-static' only"),
    ],
)
def test_static_int8_calibration_errors(bert: tuple[Embedder, Path], tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        export_openvino(bert[0], tmp_path / "bad", **kwargs)
    assert not (tmp_path / "bad").exists()


def test_decoder_last_token_pooling_with_left_padding(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_llama_dir, padding_side="left", device="cpu")
    loaded = OpenVinoEmbedder.from_pretrained(export_openvino(model, tmp_path / "llama"))
    np.testing.assert_allclose(loaded.encode(TEXTS, 2), model.encode(TEXTS, 2), atol=FP32_TOLERANCE)


def test_prompts_roles_and_overrides_travel(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, query_prompt="query: {text}", document_prompt="passage: {text}", device="cpu")
    folder = export_openvino(model, tmp_path / "m")
    loaded = OpenVinoEmbedder.from_pretrained(folder)
    for role in ("query", "document", None):
        np.testing.assert_allclose(loaded.encode(TEXTS, role=role), model.encode(TEXTS, role=role), atol=FP32_TOLERANCE)
    short = Embedder.from_pretrained(folder, max_length=4)
    np.testing.assert_allclose(short.encode(TEXTS), Embedder.from_pretrained(tiny_bert_dir, max_length=4, device="cpu").encode(TEXTS), atol=FP32_TOLERANCE)
    with pytest.raises(ConfigError, match="fixed when the model was exported"):
        Embedder.from_pretrained(folder, pooling="cls")


def test_concurrent_callers_get_their_own_vectors(bert: tuple[Embedder, Path]) -> None:
    model, folder = bert
    loaded = OpenVinoEmbedder.from_pretrained(folder)
    expected = {i: model.encode(TEXTS[i:] + TEXTS[:i]) for i in range(len(TEXTS))}
    failures: list[str] = []

    def work(i: int) -> None:
        for _ in range(5):
            got = loaded.encode(TEXTS[i:] + TEXTS[:i], 2)
            if not np.allclose(got, expected[i], atol=FP32_TOLERANCE):
                failures.append(f"caller {i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(TEXTS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_bad_folders_and_options_are_clear_errors(bert: tuple[Embedder, Path], tiny_bert_dir: Path, tmp_path: Path) -> None:
    model, folder = bert
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / OPENVINO_FILE).write_text("<net><layers><layer", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a valid OpenVINO/ONNX model"):
        OpenVinoEmbedder.from_pretrained(broken)
    (broken / OPENVINO_FILE).unlink()
    with pytest.raises(ConfigError, match="not an OpenVINO or ONNX model folder"):
        OpenVinoEmbedder.from_pretrained(broken)
    with pytest.raises(ConfigError, match="not an OpenVINO or ONNX model folder"):
        Embedder.from_pretrained(tiny_bert_dir, backend="openvino")
    with pytest.raises(ConfigError, match="runs on the CPU"):
        OpenVinoEmbedder.from_pretrained(folder, device="cuda")
    with pytest.raises(ConfigError, match="quantize must be"):
        export_openvino(model, tmp_path / "q", quantize="int4")
    assert not (tmp_path / "q").exists()


def test_export_encode_and_serve_from_the_command_line(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.serve.backends import load_backend

    import helpers

    out = tmp_path / "ov"
    code, stdout, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "openvino", "--quantize", "int8", "--output-dir", str(out)], capsys)
    assert code == 0, err
    assert "OpenVINO" in stdout and "openvino" in (out / "README.md").read_text()
    code, _, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "openvino", "--optimize", "O2", "--output-dir", str(tmp_path / "x")], capsys)
    assert code != 0 and "--optimize O2: not an option of the openvino format" in err and not (tmp_path / "x").exists()
    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    calibration = tmp_path / "calibration.jsonl"
    calibration.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(CALIBRATION)))
    static = tmp_path / "static"
    code, stdout, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "openvino", "--quantize", "int8-static",
                                         "--calibration", str(calibration), "--output-dir", str(static)], capsys)  # fmt: skip
    assert code == 0, err
    assert "activations" in stdout and json.loads((static / OPENVINO_CONFIG).read_text())["calibration_texts"] == len(CALIBRATION)
    for bad, message in (([], "needs calibration texts"), (["--calibration", str(tmp_path / "missing.txt")], "missing.txt"),
                         (["--calibration-column", "text"], "--calibration-column needs --calibration")):  # fmt: skip
        code, _, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "openvino", "--quantize", "int8-static", *bad,
                                        "--output-dir", str(tmp_path / "y")], capsys)  # fmt: skip
        assert code != 0 and message in err and not (tmp_path / "y").exists(), err
    code, _, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "onnx", "--quantize", "int8", "--calibration", str(calibration),
                                    "--output-dir", str(tmp_path / "z")], capsys)  # fmt: skip
    assert (
        code != 0
        and "--calibration: not an option of the onnx format; that is the openvino format's: --format openvino" in err
        and not (tmp_path / "z").exists()
    )
    reference = OpenVinoEmbedder.from_pretrained(out).encode(TEXTS)
    for backend in ("auto", "openvino"):
        vectors = tmp_path / f"{backend}.npy"
        code, _, err = helpers.run_cli(["encode", str(out), "--backend", backend, "--input", str(texts), "--output", str(vectors), "--quiet"], capsys)
        assert code == 0, err
        np.testing.assert_allclose(np.load(vectors), reference, atol=1e-6)
    backend: Any = load_backend("openvino", str(out), device="cpu")  # what `anglekit serve --backend openvino` runs
    pooled = backend.embed(backend.tokenize(TEXTS, role=None, truncate=True))
    np.testing.assert_allclose(pooled, OpenVinoEmbedder.from_pretrained(out).encode(TEXTS, normalize=False), atol=1e-6)
    with pytest.raises(ConfigError, match="fixed when the model was exported"):
        load_backend("openvino", str(out), pooling="cls")


@pytest.mark.slow
def test_minilm_static_int8_keeps_the_vectors(tmp_path: Path) -> None:
    """The real all-MiniLM-L6-v2: static int8 (weights and activations) within the stated cosine of torch."""
    from anglekit.model.offline import minilm_dir

    try:
        directory = minilm_dir()
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    train = Path(__file__).resolve().parents[3] / "shared" / "data" / "stsb" / "sts-train.csv"
    if not train.is_file():
        pytest.skip("../shared/data not present")
    import csv

    with open(train, encoding="utf-8", newline="") as f:
        rows = [row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if len(row) >= 7]
    calibration = sorted({row[5] for row in rows} | {row[6] for row in rows})[::7][:512]  # as bench_encode
    model = Embedder.from_pretrained(directory, device="cpu")
    # 48 near-identical template sentences measure the wrong ranges: the check refuses the export.
    with pytest.raises(ConfigError, match="calibrate on more, and more varied, texts"):
        export_openvino(model, tmp_path / "templated", quantize="int8-static", calibration_texts=CALIBRATION)
    assert not (tmp_path / "templated").exists()
    folder = export_openvino(model, tmp_path / "static", quantize="int8-static", calibration_texts=calibration)
    assert row_cosines(OpenVinoEmbedder.from_pretrained(folder).encode(TEXTS), model.encode(TEXTS)).min() >= INT8_MIN_COSINE


# ------------------------------------------------------------------ precision: a setting, never the CPU's default
def _openvino_bf16() -> bool:
    import openvino as ov

    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


needs_bf16 = pytest.mark.skipif("not _openvino_bf16()", reason="needs a CPU with avx512_bf16 or amx_bf16 (OpenVINO reports no BF16 capability)")


def test_fp32_is_asked_for_explicitly_whatever_the_cpu_default(bert: tuple[Embedder, Path], tmp_path: Path) -> None:
    """OpenVINO's CPU plugin computes in bf16 by default where the CPU can: every compile sets f32."""
    import openvino as ov

    from anglekit.model.openvino import compiled_precision

    model, folder = bert
    assert json.loads((folder / OPENVINO_CONFIG).read_text())["precision"] == "fp32"
    loaded = OpenVinoEmbedder.from_pretrained(folder)
    assert loaded.precision == "fp32" and compiled_precision(loaded.session) == "fp32"
    assert str(loaded.session.get_property("INFERENCE_PRECISION_HINT")) == str(ov.Type.f32)
    onnx_under_ov = OpenVinoEmbedder.from_pretrained(export_onnx(model, tmp_path / "onnx"))
    assert onnx_under_ov.precision == "fp32"
    # An export from before precision was recorded: fp32, as it was checked.
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    info = json.loads((old / OPENVINO_CONFIG).read_text())
    del info["precision"]
    (old / OPENVINO_CONFIG).write_text(json.dumps(info))
    old_model = OpenVinoEmbedder.from_pretrained(old)
    assert old_model.precision == "fp32"
    np.testing.assert_allclose(old_model.encode(TEXTS), model.encode(TEXTS), atol=FP32_TOLERANCE)


@needs_bf16
def test_bf16_is_its_own_choice_with_its_own_check(bert: tuple[Embedder, Path], tmp_path: Path) -> None:
    from anglekit.model.openvino import BF16_MIN_COSINE, compiled_precision

    model, fp32_folder = bert
    folder = export_openvino(model, tmp_path / "bf16", precision="bf16")
    info = json.loads((folder / OPENVINO_CONFIG).read_text())
    assert info["precision"] == "bf16" and info["check"]["min_cosine"] >= BF16_MIN_COSINE
    loaded = OpenVinoEmbedder.from_pretrained(folder)  # the recorded precision
    assert loaded.precision == "bf16" and compiled_precision(loaded.session) == "bf16"
    vectors = loaded.encode(TEXTS)
    assert row_cosines(vectors, model.encode(TEXTS)).min() >= BF16_MIN_COSINE
    assert np.abs(vectors - model.encode(TEXTS)).max() > 0  # really computed in bf16, not fp32
    as_fp32 = OpenVinoEmbedder.from_pretrained(folder, precision="fp32")  # the caller's setting wins
    assert as_fp32.precision == "fp32"
    np.testing.assert_allclose(as_fp32.encode(TEXTS), model.encode(TEXTS), atol=FP32_TOLERANCE)
    assert Embedder.from_pretrained(fp32_folder, precision="bf16").precision == "bf16"


def test_bf16_where_the_cpu_cannot_is_refused_or_warned(bert: tuple[Embedder, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """A CPU without bf16 instructions: OpenVINO would replace the hint with f32 (simulated here by
    reading back f32 whatever was asked, so the test runs on every CPU)."""
    import anglekit.model.openvino as ovmod

    model, folder = bert
    monkeypatch.setattr(ovmod, "compiled_precision", lambda compiled: "fp32")
    with pytest.raises(ConfigError, match="cannot compute in bf16 on this CPU.*avx512_bf16"):
        export_openvino(model, tmp_path / "bf16", precision="bf16")
    assert not (tmp_path / "bf16").exists()
    with pytest.raises(ConfigError, match="cannot compute in bf16 on this CPU"):
        OpenVinoEmbedder.from_pretrained(folder, precision="bf16")
    recorded = tmp_path / "recorded"  # exported as bf16 on another machine
    shutil.copytree(folder, recorded)
    info = json.loads((recorded / OPENVINO_CONFIG).read_text())
    (recorded / OPENVINO_CONFIG).write_text(json.dumps({**info, "precision": "bf16"}))
    with caplog.at_level("WARNING", logger="anglekit.model.openvino"):
        loaded = OpenVinoEmbedder.from_pretrained(recorded)
    assert loaded.precision == "fp32" and "running in fp32" in caplog.text
    np.testing.assert_allclose(loaded.encode(TEXTS), model.encode(TEXTS), atol=FP32_TOLERANCE)


@pytest.mark.parametrize("bad", ["fp16", "FP32", "", 32, None, ["bf16"]])
def test_bad_precisions_are_clear_errors(bert: tuple[Embedder, Path], tmp_path: Path, bad: Any) -> None:
    model, folder = bert
    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16"):
        export_openvino(model, tmp_path / "x", precision=bad)
    assert not (tmp_path / "x").exists()
    if bad is not None:
        with pytest.raises(ConfigError, match="precision must be one of fp32, bf16"):
            Embedder.from_pretrained(folder, precision=bad)
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    info = json.loads((broken / OPENVINO_CONFIG).read_text())
    (broken / OPENVINO_CONFIG).write_text(json.dumps({**info, "precision": bad if bad is not None else 16}))
    with pytest.raises(ConfigError, match=f"{OPENVINO_CONFIG}: precision"):
        OpenVinoEmbedder.from_pretrained(broken)


def test_precision_flags_of_export_encode_and_serve(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.serve.backends import load_backend

    import helpers

    out = tmp_path / "ov"
    code, stdout, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "openvino", "--precision", "fp32", "--output-dir", str(out)], capsys)
    assert code == 0, err
    assert "checked with OpenVINO (fp32)" in stdout and json.loads((out / OPENVINO_CONFIG).read_text())["precision"] == "fp32"
    code, _, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "onnx", "--precision", "bf16", "--output-dir", str(tmp_path / "o")], capsys)
    assert code != 0 and "--precision bf16: not an option of the onnx format" in err and not (tmp_path / "o").exists()
    code, _, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "openvino", "--precision", "fp8", "--output-dir", str(tmp_path / "p")], capsys)
    assert code == 2 and "invalid choice: 'fp8'" in err and not (tmp_path / "p").exists()
    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    reference = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(TEXTS)
    code, _, err = helpers.run_cli(["encode", str(out), "--precision", "fp32", "--input", str(texts), "--output", str(tmp_path / "v.npy"), "--quiet"], capsys)
    assert code == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), reference, atol=FP32_TOLERANCE)
    backend: Any = load_backend("openvino", str(out), precision="fp32")
    assert backend.precision == "fp32"
    with pytest.raises(ConfigError, match="onnxruntime runs the exported graph in fp32"):
        load_backend("onnx", str(export_onnx(Embedder.from_pretrained(tiny_bert_dir, device="cpu"), tmp_path / "onnx")), precision="bf16")


@pytest.mark.parametrize("model_dir", ["tiny_bert_dir", "tiny_llama_dir"])
def test_batches_are_padded_to_a_multiple_of_8_with_the_vectors_of_exact_padding(
    model_dir: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Embedder.from_pretrained(request.getfixturevalue(model_dir), max_length=30, device="cpu")
    loaded = OpenVinoEmbedder.from_pretrained(export_openvino(model, tmp_path / "ov"))
    ids = loaded.tokenize_unpadded(TEXTS)
    assert loaded.pad_multiple == 8 and OnnxEmbedder.pad_multiple == 1
    widths = {loaded.pad([ids[i], ids[j]])["input_ids"].shape[1] for i in range(len(ids)) for j in range(len(ids))}
    assert all(w % 8 == 0 or w == 30 for w in widths) and 30 in widths and len(widths) > 1  # never past max_length
    left = loaded.tokenizer.padding_side == "left"
    padded = loaded.pad([ids[1], ids[0]])["attention_mask"]
    assert padded[0, -1 if left else 0] == 1 and padded[0, 0 if left else -1] == 0
    rounded = loaded.encode(TEXTS, 2)
    monkeypatch.setattr(loaded, "pad_multiple", 1)
    assert {loaded.pad([ids[1], ids[0]])["input_ids"].shape[1]} == {max(len(ids[0]), len(ids[1]))}
    np.testing.assert_allclose(rounded, loaded.encode(TEXTS, 2), atol=FP32_TOLERANCE)
    np.testing.assert_allclose(rounded, model.encode(TEXTS, 2), atol=FP32_TOLERANCE)
