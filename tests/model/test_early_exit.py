"""Early exit (ESE layer truncation without running the later blocks): the vectors equal the pooled
hidden state of that layer from a full forward pass (transformers' own ``output_hidden_states``),
the later blocks do not run, and bad layers are ConfigErrors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.model.config import EmbedderConfig
from anglekit.model.early_exit import hidden_states_to, layer_blocks
from anglekit.model.embedder import Embedder
from anglekit.model.pooling import pool

import helpers

TEXTS = ["a short one", "the second text is a little longer than the first", "three", "a fourth and last text of the batch"]


@pytest.fixture(scope="module")
def four_layer_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("four-layers")
    return {"bert": helpers.build_tiny_bert(root / "bert", layers=4), "llama": helpers.build_tiny_llama(root / "llama", layers=4)}


def reference(model: Embedder, layer: int, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The layer's vectors from a full forward pass: transformers' hidden_states[:layer + 1], pooled."""
    inputs = dict(batch)
    if model.tokenizer.padding_side == "left":
        inputs["position_ids"] = (batch["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        out = model.backbone(**inputs, output_hidden_states=True, return_dict=True)
    return pool(model.config.pooling, out.hidden_states[: layer + 1], batch["attention_mask"])


def count_block_calls(model: Embedder) -> list[int]:
    calls = [0] * len(layer_blocks(model.backbone))
    for i, block in enumerate(layer_blocks(model.backbone)):
        block.register_forward_hook(lambda m, a, o, i=i: calls.__setitem__(i, calls[i] + 1))
    return calls


@pytest.mark.parametrize(("arch", "pooling"), [("bert", "cls"), ("bert", "last_avg"), ("bert", "first_last_avg"), ("bert", "last_max"),
                                                ("llama", "last_token"), ("llama", "last_avg")])  # fmt: skip
@pytest.mark.parametrize("layer", [1, 2, 3])
def test_early_exit_equals_the_layer_of_a_full_pass_and_skips_the_rest(four_layer_dirs: dict[str, Path], arch: str, pooling: str, layer: int) -> None:
    model = Embedder.from_pretrained(four_layer_dirs[arch], pooling=pooling, device="cpu").eval()
    batch = model.tokenize(TEXTS)
    expected = reference(model, layer, batch)
    calls = count_block_calls(model)
    with torch.inference_mode():
        got = model(**batch, layer=layer)
    assert calls == [1] * layer + [0] * (4 - layer)  # the blocks after the layer did not run
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # The saved setting (config.layer) takes the same path, and encode() gives the same vectors.
    saved = Embedder.from_pretrained(four_layer_dirs[arch], pooling=pooling, layer=layer, device="cpu")
    vectors = saved.encode(TEXTS, batch_size=4)
    torch.testing.assert_close(torch.from_numpy(vectors), expected, atol=1e-5, rtol=1e-5)


def test_the_last_layer_is_an_ordinary_forward_pass(four_layer_dirs: dict[str, Path]) -> None:
    model = Embedder.from_pretrained(four_layer_dirs["llama"], device="cpu").eval()
    batch = model.tokenize(TEXTS)
    with torch.inference_mode():
        torch.testing.assert_close(model(**batch, layer=4), model(**batch), atol=0, rtol=0)


def test_with_gradients_every_block_runs_and_the_layer_is_the_same(four_layer_dirs: dict[str, Path]) -> None:
    model = Embedder.from_pretrained(four_layer_dirs["bert"], device="cpu").eval()
    batch = model.tokenize(TEXTS)
    calls = count_block_calls(model)
    with_grad = model(**batch, layer=2)
    assert calls == [1, 1, 1, 1] and with_grad.requires_grad
    with torch.inference_mode():
        torch.testing.assert_close(model(**batch, layer=2), with_grad.detach(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("layer", [0, 5, -1, True, 2.0, "2"])
def test_a_layer_the_model_lacks_is_a_config_error(four_layer_dirs: dict[str, Path], layer: Any) -> None:
    model = Embedder.from_pretrained(four_layer_dirs["bert"], device="cpu")
    batch = model.tokenize(TEXTS)
    with pytest.raises(ConfigError, match="layer must be an integer between 1 and 4"), torch.inference_mode():
        model(**batch, layer=layer)


def test_hidden_states_to_refuses_the_last_layer_and_a_model_without_blocks(four_layer_dirs: dict[str, Path]) -> None:
    model = Embedder.from_pretrained(four_layer_dirs["bert"], device="cpu")
    batch = model.tokenize(TEXTS)
    with pytest.raises(ConfigError, match="between 1 and 3"):
        hidden_states_to(model.backbone, 4, **batch)
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        layer_blocks(torch.nn.Linear(2, 2))


def test_early_exit_is_saved_and_not_in_the_fingerprint(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    before = model.fingerprint()
    model.config.early_exit = True
    assert model.fingerprint() == before  # it changes no vector: indexes built before still match
    folder = model.save_pretrained(tmp_path / "saved")
    again = Embedder.from_pretrained(folder, device="cpu")
    assert again.config.early_exit is True and again.fingerprint() == before
    with pytest.raises(ConfigError, match="early_exit must be true or false"):
        EmbedderConfig.from_dict({"early_exit": "yes"})
