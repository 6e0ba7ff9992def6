"""``anglekit.export.export(..., format="sentence-transformers")``: the installed sentence-transformers
loading the exported folder embeds like anglekit (1e-5 after normalisation, texts longer than the
max length included) for every pooling, prompts, decoders and merged adapters; anglekit loads the
folder, and sentence-transformers' own re-save of it, back to the same vectors; what the format
cannot express is refused and nothing is written.

Other sentence-transformers versions: set ``ANGLEKIT_OTHER_ST`` to folders (separated by
``os.pathsep``) that each hold a ``sentence_transformers`` package (e.g. ``pip install --no-deps
--target DIR sentence-transformers==5.3.0``); each then loads the exports in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.errors import ExportError
from anglekit.export import FORMATS, ExportResult, export
from anglekit.model.embedder import Embedder

import helpers

st = pytest.importorskip("sentence_transformers")

LONG = " ".join(["the old woman walks her small white dog in the park"] * 12)
TEXTS = ["a man is playing the guitar .", "dog", 'he said "no" ?', "wow!", LONG]
POOLINGS = ["cls", "cls_avg", "last_avg", "last_max", "first_last_avg", "last_token"]
LEGACY_KEYS = {
    "word_embedding_dimension", "pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken", "include_prompt",
}  # fmt: skip


def _unit(vectors: Any) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _st_model(folder: Path, trust: bool) -> Any:
    return st.SentenceTransformer(str(folder), device="cpu", trust_remote_code=trust)


def _assert_same(embedder: Embedder, folder: Path, trust: bool, methods: tuple[str, ...] = ("encode",)) -> None:
    model = _st_model(folder, trust)
    for method in methods:
        ours = getattr(embedder, method)(TEXTS, batch_size=2, normalize=True)
        theirs = _unit(getattr(model, method)(TEXTS, batch_size=2, convert_to_numpy=True))
        np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0, err_msg=f"{folder.name} {method}")


@pytest.fixture(scope="module")
def tiny_gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helpers.build_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2") / "model")


# ------------------------------------------------------------------ every pooling


@pytest.mark.parametrize("pooling", POOLINGS)
def test_every_pooling_round_trips_through_sentence_transformers(tiny_bert_dir: Path, tmp_path: Path, pooling: str) -> None:
    normalize = pooling != "last_max"
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling=pooling, max_length=24, normalize=normalize, device="cpu")
    result = export(embedder, output_dir=tmp_path / "exported")
    assert isinstance(result, ExportResult) and result.folder == tmp_path / "exported" and result.format == "sentence-transformers"
    assert result.max_difference is not None and result.max_difference < 1e-5 and "sentence-transformers" in result.check
    custom = pooling in ("cls_avg", "first_last_avg")
    assert result.trust_remote_code is custom
    folder = result.folder

    modules = json.loads((folder / "modules.json").read_text())
    types = [m["type"] for m in modules]
    assert types[0] == "sentence_transformers.models.Transformer"
    assert (types[-1] == "sentence_transformers.models.Normalize") is normalize
    sbert = json.loads((folder / "sentence_bert_config.json").read_text())
    assert sbert == {"max_seq_length": 24, "do_lower_case": False}
    if custom:
        assert types[1] == "anglekit_modules.AnglekitPooling" and not (folder / "1_Pooling").exists()
        assert (folder / "anglekit_modules.py").is_file()
        assert json.loads((folder / "config.json").read_text()).get("output_hidden_states", False) is (pooling == "first_last_avg")
        with pytest.raises(ValueError, match="trust_remote_code"):  # sentence-transformers >= 6 asks for the flag
            _st_model(folder, trust=False)
    else:
        assert types[1] == "sentence_transformers.models.Pooling" and not (folder / "anglekit_modules.py").exists()
        pooling_config = json.loads((folder / "1_Pooling" / "config.json").read_text())
        assert set(pooling_config) == LEGACY_KEYS  # what TEI and every sentence-transformers read
        assert sum(v is True for k, v in pooling_config.items() if k.startswith("pooling_mode_")) == 1
        assert pooling_config["include_prompt"] is True

    _assert_same(embedder, folder, custom)
    # anglekit loads the export as the same model.
    again = Embedder.from_pretrained(folder, device="cpu")
    assert again.config == embedder.config
    np.testing.assert_allclose(again.encode(TEXTS, normalize=True), embedder.encode(TEXTS, normalize=True), atol=1e-6, rtol=0)


@pytest.mark.parametrize("pooling", ["cls", "last_avg", "last_max", "last_token", "cls_avg"])
def test_anglekit_reads_sentence_transformers_resave_of_an_export(tiny_bert_dir: Path, tmp_path: Path, pooling: str) -> None:
    """sentence-transformers' own save writes its current layout (and no anglekit_config.json)."""
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling=pooling, max_length=20, normalize=True, device="cpu")
    custom = pooling == "cls_avg"
    folder = export(embedder, output_dir=tmp_path / "exported").folder
    model = _st_model(folder, custom)
    expected = _unit(model.encode(TEXTS, batch_size=2))
    model.save(str(tmp_path / "resaved"))
    assert not (tmp_path / "resaved" / "anglekit_config.json").exists()
    loaded = Embedder.from_pretrained(tmp_path / "resaved", device="cpu")
    assert (loaded.config.pooling, loaded.config.max_length, loaded.config.normalize) == (pooling, 20, True)
    np.testing.assert_allclose(loaded.encode(TEXTS, batch_size=3, normalize=True), expected, atol=1e-5, rtol=0)


# ------------------------------------------------------------------ prompts and decoders


@pytest.mark.parametrize(
    ("kwargs", "custom"),
    [
        ({}, False),
        ({"prompt": "paper"}, True),  # text inside the template + the paper's preprocessing
        ({"prompt": "query: {text}"}, False),
        ({"query_prompt": "query: {text}", "document_prompt": "passage: {text}"}, False),
        ({"prompt": "sum: {text}", "query_prompt": "query: {text}"}, False),
    ],
)
@pytest.mark.parametrize("model", ["llama", "gpt2"])
def test_decoders_and_prompts_round_trip(tiny_llama_dir: Path, tiny_gpt2_dir: Path, tmp_path: Path, model: str, kwargs: dict[str, str], custom: bool) -> None:
    base = tiny_llama_dir if model == "llama" else tiny_gpt2_dir
    embedder = Embedder.from_pretrained(base, max_length=24, device="cpu", **kwargs)
    assert embedder.tokenizer.padding_side == "left"
    result = export(embedder, output_dir=tmp_path / "exported")
    assert result.trust_remote_code is custom
    assert embedder.tokenizer.padding_side == "left"  # the model itself is untouched
    assert json.loads((result.folder / "tokenizer_config.json").read_text())["padding_side"] == "right"
    _assert_same(embedder, result.folder, custom, ("encode", "encode_query", "encode_document"))
    again = Embedder.from_pretrained(result.folder, device="cpu")
    assert again.config == embedder.config


def test_prompts_are_written_as_sentence_transformers_prompts(tiny_bert_dir: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, prompt="sts: {text}", query_prompt="query: {text}", device="cpu")
    folder = export(embedder, output_dir=tmp_path / "exported").folder
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert config["prompts"] == {"query": "query: ", "document": "sts: ", "default": "sts: "}
    assert config["default_prompt_name"] == "default" and config["similarity_fn_name"] == "cosine"
    assert "TEI" in (folder / "README.md").read_text() and "--default-prompt-name default" in (folder / "README.md").read_text()


def test_adapters_are_merged_into_a_copy(tiny_llama_dir: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu").add_lora(rank=4, alpha=8, dropout=0.0)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in embedder.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    result = export(embedder, output_dir=tmp_path / "from-memory")
    assert embedder.has_lora  # the caller's model keeps its adapters
    assert not (result.folder / "adapter_config.json").exists() and (result.folder / "model.safetensors").is_file()
    _assert_same(embedder, result.folder, True)
    # From a saved folder of adapters, by path: loaded, merged, exported.
    saved = embedder.save_pretrained(tmp_path / "adapters")
    by_path = export(str(saved), output_dir=tmp_path / "from-path")
    _assert_same(embedder, by_path.folder, True)


# ------------------------------------------------------------------ refusals and outputs


def test_what_the_format_cannot_express_is_refused_and_nothing_is_written(tiny_llama_dir: Path, tmp_path: Path) -> None:
    bidirectional = Embedder.from_pretrained(tiny_llama_dir, bidirectional=True, device="cpu")
    with pytest.raises(ExportError, match="bidirectional"):
        export(bidirectional, output_dir=tmp_path / "a")
    roles = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", query_prompt="query: {text}", device="cpu")
    with pytest.raises(ExportError, match="prompts.query"):
        export(roles, output_dir=tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no staging folder left behind


def test_quantised_weights_are_refused(tiny_bert_dir: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    embedder.backbone.quantization_method = "bitsandbytes"  # what a k-bit load (CUDA only) leaves
    with pytest.raises(ExportError, match="quantised .*bitsandbytes"):
        export(embedder, output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_export_that_would_embed_differently_is_refused(tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Break the writer (mean pooling written as cls): the check with sentence-transformers catches it."""
    from anglekit.model import st_layout

    monkeypatch.setitem(st_layout.ST_MODE, "last_avg", "cls")
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu")
    with pytest.raises(ExportError, match="embeds differently"):
        export(embedder, output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    unchecked = export(embedder, output_dir=tmp_path / "out", verify=False)  # the check can be skipped, and says so
    assert unchecked.max_difference is None and "not checked" in unchecked.check


def test_output_folder_rules(tiny_bert_dir: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    target = tmp_path / "out"
    target.mkdir()
    (target / "stale.txt").write_text("old")
    with pytest.raises(ExportError, match="not empty"):
        export(embedder, output_dir=target)
    assert (target / "stale.txt").read_text() == "old"
    export(embedder, output_dir=target, overwrite=True)
    assert not (target / "stale.txt").exists() and (target / "modules.json").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="not a folder"):
        export(embedder, output_dir=tmp_path / "file")
    with pytest.raises(ExportError, match="output_dir is required"):
        export(embedder)
    with pytest.raises(ExportError, match="unknown export format 'tflite'"):
        export(embedder, "tflite", output_dir=tmp_path / "x")
    with pytest.raises(ExportError, match="--quantize int8: not an option of the sentence-transformers format; the onnx and openvino formats take it"):
        export(embedder, output_dir=tmp_path / "x", options={"quantize": "int8"})
    with pytest.raises(ExportError, match="must be an Embedder"):
        export(42, output_dir=tmp_path / "x")
    with pytest.raises(ExportError, match="loading options"):
        export(embedder, output_dir=tmp_path / "x", dtype="bf16")
    assert list(FORMATS) == ["sentence-transformers", "onnx", "openvino"]


def test_the_card_of_an_export(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.card import ModelCardData, read_card

    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu")
    card = ModelCardData(base_model="sentence-transformers/all-MiniLM-L6-v2", datasets=["sentence-transformers/stsb"],
                         objective={"preset": "paper", "angle_tau": 1.0}, training={"steps": 7, "seed": 3},
                         scores={"stsb:test": {"spearman": 80.5, "pearson": 79.0}})  # fmt: skip
    saved = embedder.save_pretrained(tmp_path / "trained", card=card)
    folder = export(str(saved), output_dir=tmp_path / "exported").folder  # the training summary travels
    text = (folder / "README.md").read_text()
    for needle in ("library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "base_model: sentence-transformers/all-MiniLM-L6-v2",
                   "- sentence-transformers/stsb", "| angle_tau | 1 |", "| seed | 3 |", "| stsb:test | 79.00 | 80.50 |"):  # fmt: skip
        assert needle in text, needle
    assert read_card(str(folder)) == card


# ------------------------------------------------------------------ other sentence-transformers versions


@pytest.mark.skipif(not os.environ.get("ANGLEKIT_OTHER_ST"), reason="set ANGLEKIT_OTHER_ST to folders holding other sentence-transformers versions")
def test_other_sentence_transformers_versions_load_the_exports(tiny_bert_dir: Path, tiny_llama_dir: Path, tmp_path: Path) -> None:
    cases = {f"bert-{p}": Embedder.from_pretrained(tiny_bert_dir, pooling=p, max_length=24, normalize=True, device="cpu") for p in POOLINGS}
    cases["llama-paper"] = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", max_length=24, device="cpu")
    cases["llama-prefix"] = Embedder.from_pretrained(tiny_llama_dir, prompt="query: {text}", max_length=24, device="cpu")
    expected = {}
    for name, embedder in cases.items():
        folder = export(embedder, output_dir=tmp_path / name).folder
        expected[str(folder)] = embedder.encode(TEXTS, batch_size=2, normalize=True).tolist()
    (tmp_path / "expected.json").write_text(json.dumps({"texts": TEXTS, "vectors": expected}))
    script = (
        "import json, sys, numpy as np, sentence_transformers as st\n"
        "data = json.load(open(sys.argv[1]))\n"
        "worst = 0.0\n"
        "for folder, vectors in data['vectors'].items():\n"
        "    got = st.SentenceTransformer(folder, device='cpu', trust_remote_code=True).encode(data['texts'], batch_size=2)\n"
        "    got = got / np.linalg.norm(got, axis=1, keepdims=True)\n"
        "    worst = max(worst, float(np.abs(got - np.array(vectors)).max()))\n"
        "print(st.__version__, worst)\n"
    )
    for site in os.environ["ANGLEKIT_OTHER_ST"].split(os.pathsep):
        env = {**os.environ, "PYTHONPATH": site, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "expected.json")], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        version, worst = done.stdout.split()[-2:]
        assert float(worst) < 1e-5, f"sentence-transformers {version}: {worst}"


# ------------------------------------------------------------------ nested dimensions


@pytest.mark.parametrize("normalize", [True, False])
def test_truncate_dim_is_written_and_sentence_transformers_truncates(tiny_bert_dir: Path, tmp_path: Path, normalize: bool) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", normalize=normalize, truncate_dim=12, device="cpu")
    result = export(embedder, output_dir=tmp_path / "exported")
    assert result.max_difference is not None and result.max_difference < 1e-5
    folder = result.folder
    assert json.loads((folder / "config_sentence_transformers.json").read_text())["truncate_dim"] == 12
    model = _st_model(folder, trust=False)
    theirs = model.encode(TEXTS, batch_size=2, convert_to_numpy=True)
    assert theirs.shape == (len(TEXTS), 12)
    ours = embedder.encode(TEXTS, batch_size=2)
    assert ours.shape == (len(TEXTS), 12)
    # The same direction; sentence-transformers cuts after its Normalize module (unit norm on request).
    np.testing.assert_allclose(_unit(theirs), _unit(ours), atol=1e-5, rtol=0)
    unit = model.encode(TEXTS, batch_size=2, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(unit, _unit(ours), atol=1e-5, rtol=0)
    again = Embedder.from_pretrained(folder, device="cpu")
    assert again.config.truncate_dim == 12


def test_without_truncate_dim_no_key_is_written(tiny_bert_dir: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="cls", device="cpu")
    folder = export(embedder, output_dir=tmp_path / "exported").folder
    assert "truncate_dim" not in json.loads((folder / "config_sentence_transformers.json").read_text())


def test_a_layer_truncated_model_is_refused(tiny_bert_dir: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="cls", layer=1, device="cpu")
    with pytest.raises(ExportError, match="layer 1"):
        export(embedder, output_dir=tmp_path / "exported")
    assert not (tmp_path / "exported").exists() or not any((tmp_path / "exported").iterdir())
