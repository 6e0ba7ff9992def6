"""BERT-style layers over the real tokens only (``pack_tokens``): the masks it reads, the same
outputs and gradients as the class's forward, the calls it leaves to the class, the swap and its
guard, and a training run that ends where the padded run ends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel
from transformers.models.bert.modeling_bert import BertLayer

from anglekit.model.embedder import Embedder
from anglekit.training.run import train
from anglekit.training.speed.packed_layers import packed_layer_forward, packed_layers, real_tokens

from helpers import train_config

PADDING = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]])


def _bert(attention: str = "sdpa", cls: type = BertModel, config: type = BertConfig, **kwargs: Any) -> Any:
    torch.manual_seed(0)
    settings = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=40)
    model = cls(config(**{**settings, "pad_token_id": 1, **kwargs}))
    model.set_attn_implementation(attention)
    return model


def _inputs() -> dict[str, torch.Tensor]:
    ids = torch.randint(2, 50, PADDING.shape, generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids.masked_fill(PADDING == 0, 1), "attention_mask": PADDING}


def _run(model: Any, packed: bool, **kwargs: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
    """Real-token outputs (every layer's), parameter gradients of a loss on them, layers swapped."""
    model.zero_grad(set_to_none=True)
    with packed_layers(model, enabled=packed, device="cpu") as count:
        out = model(**_inputs(), output_hidden_states=True, **kwargs)
    real = PADDING.bool()
    states = torch.stack([h[real] for h in out.hidden_states])
    weights = torch.linspace(-1, 1, states.shape[-1])
    (states * weights).sum().backward()
    return states.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, count


# ---------------------------------------------------------------------- reading the mask


def test_real_tokens_reads_2d_boolean_and_additive_masks() -> None:
    keep = PADDING.bool()
    assert torch.equal(real_tokens(PADDING, 3, 7), keep)
    boolean = keep[:, None, None, :].expand(3, 1, 7, 7)
    assert torch.equal(real_tokens(boolean, 3, 7), keep)
    additive = torch.zeros(3, 1, 7, 7).masked_fill(~boolean, torch.finfo(torch.float32).min)
    assert torch.equal(real_tokens(additive, 3, 7), keep)
    assert torch.equal(real_tokens(additive[:, :, :1], 3, 7), keep)  # (batch, 1, 1, length) broadcast masks too


@pytest.mark.parametrize(
    "mask",
    [None, "not a tensor", torch.ones(3, 8), torch.ones(2, 7), torch.ones(3, 2, 7, 7, dtype=torch.bool), torch.ones(3, 7, 7),
     torch.full((3, 1, 7, 7), 0.5), torch.ones(3, 1, 7, 7, dtype=torch.long)],
    ids=["none", "str", "2d-length", "2d-batch", "4d-heads", "3d", "bias-values", "4d-int"],
)  # fmt: skip
def test_real_tokens_is_none_where_it_cannot_tell(mask: Any) -> None:
    assert real_tokens(mask, 3, 7) is None


# ---------------------------------------------------------------------- the same maths


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_outputs_and_gradients_equal_the_padded_forward(attention: str, family: str) -> None:
    model = _bert(attention, *((RobertaModel, RobertaConfig) if family == "roberta" else ()))
    model.eval()  # no dropout: both forwards draw nothing
    reference, reference_grads, none = _run(model, packed=False)
    packed, packed_grads, count = _run(model, packed=True)
    assert none == 0 and count == 2
    torch.testing.assert_close(packed, reference, rtol=1e-4, atol=1e-5)
    assert packed_grads.keys() == reference_grads.keys() and len(packed_grads) > 10
    for name, grad in packed_grads.items():
        torch.testing.assert_close(grad, reference_grads[name], rtol=1e-4, atol=1e-5, msg=name)
    assert not any("forward" in m.__dict__ for m in model.modules())  # put back


@pytest.mark.parametrize("hidden_states", [False, True])
def test_a_model_call_takes_the_packed_path_in_every_layer(monkeypatch: pytest.MonkeyPatch, hidden_states: bool) -> None:
    # as anglekit's Embedder calls the backbone in training: output_hidden_states reaches every layer
    model = _bert().train()
    calls: list[int] = []
    original = type(model.encoder.layer[0]).forward
    with packed_layers(model, enabled=True, device="cpu") as count:
        monkeypatch.setattr(type(model.encoder.layer[0]), "forward", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
        out = model(**_inputs(), output_hidden_states=hidden_states, output_attentions=False, return_dict=True)
    assert count == 2 and calls == []  # the class's forward never ran
    assert out.last_hidden_state.shape == (3, 7, 32) and (out.hidden_states is not None) == hidden_states
    if hidden_states:
        assert len(out.hidden_states) == 3 and torch.equal(out.hidden_states[-1], out.last_hidden_state)


def test_half_weights_are_packed_too() -> None:
    model = _bert().to(torch.bfloat16).eval()
    with packed_layers(model, enabled=True, device="cpu") as count, torch.no_grad():
        packed = model(**_inputs()).last_hidden_state[PADDING.bool()]
    reference = model(**_inputs()).last_hidden_state[PADDING.bool()].detach()
    assert count == 2
    torch.testing.assert_close(packed.float(), reference.float(), rtol=5e-2, atol=5e-2)


def test_padding_rows_are_zero_and_training_dropout_still_draws() -> None:
    model = _bert(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.0)
    model.train()
    with packed_layers(model, enabled=True, device="cpu") as count, torch.no_grad():
        states = model(**_inputs()).last_hidden_state
        layer = model.encoder.layer[0]
        assert count == 2 and "forward" in layer.__dict__
        # dropout acts on the real tokens alone: the output differs draw to draw, padding rows stay 0
        x = torch.randn(3, 7, 32)
        mask = PADDING.bool()[:, None, None, :].expand(3, 1, 7, 7)
        first, second = layer(x, mask), layer(x, mask)
    assert not torch.equal(first, second)
    assert torch.equal(first[~PADDING.bool()], torch.zeros_like(first[~PADDING.bool()]))
    assert torch.equal(states[~PADDING.bool()], torch.zeros_like(states[~PADDING.bool()]))


# ---------------------------------------------------------------------- what it leaves to the class


def test_calls_it_does_not_cover_run_the_class_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _bert()
    model.eval()
    layer = model.encoder.layer[0]
    calls: list[str] = []
    original = type(layer).forward

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append("class")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(layer), "forward", counted)
    x = torch.randn(3, 7, 32)
    mask = PADDING.bool()[:, None, None, :].expand(3, 1, 7, 7)
    with torch.no_grad():
        packed_layer_forward(layer, x, mask)  # covered: the class is not called
        packed_layer_forward(layer, x, mask, output_attentions=False, output_hidden_states=True, position_ids=None)  # covered too
        assert calls == []
        packed_layer_forward(layer, x, None)  # no mask
        packed_layer_forward(layer, x, torch.ones(3, 1, 7, 7, dtype=torch.bool))  # no padding
        packed_layer_forward(layer, x, mask, torch.randn(3, 4, 32))  # cross-attention states
        packed_layer_forward(layer, x, mask, output_attentions=True)  # something asked of the class
        layer.chunk_size_feed_forward = 7
        packed_layer_forward(layer, x, mask)  # feed-forward chunking
    assert calls == ["class"] * 5


def test_a_decoder_layer_is_left_to_its_class(caplog: pytest.LogCaptureFixture) -> None:
    decoder = _bert(is_decoder=True)
    with caplog.at_level(logging.WARNING), packed_layers(decoder, enabled=True, device="cpu") as count:
        assert count == 0
    assert "covers encoder layers only" in caplog.text


def test_a_layer_computing_something_else_is_not_swapped(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    model = _bert()
    layer_class = type(model.encoder.layer[0])
    original = layer_class.forward
    monkeypatch.setattr(layer_class, "forward", lambda self, *a, **k: original(self, *a, **k) * 2)  # a "new release"
    with caplog.at_level(logging.WARNING), packed_layers(model, enabled=True, device="cpu") as count:
        assert count == 0
    assert "computes something else in this installation" in caplog.text


def test_off_and_on_other_devices_nothing_is_swapped() -> None:
    model = _bert()
    with packed_layers(model, enabled=False, device="cpu") as off, packed_layers(model, enabled=True, device="meta") as elsewhere:
        assert off == 0 and elsewhere == 0 and not any("forward" in m.__dict__ for m in model.modules())


def test_the_swap_is_undone_after_an_error() -> None:
    model = _bert()
    with pytest.raises(RuntimeError, match="boom"), packed_layers(model, enabled=True, device="cpu") as count:
        assert count == 2
        raise RuntimeError("boom")
    assert not any("forward" in m.__dict__ for m in model.modules())


# ---------------------------------------------------------------------- end to end


def test_training_packed_ends_where_padded_training_ends(tiny_bert_dir: Path, copy_model: Any, pair_file: Path, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    model_dir = copy_model(tiny_bert_dir)
    config = (model_dir / "config.json").read_text().replace('"hidden_dropout_prob": 0.1', '"hidden_dropout_prob": 0.0')
    (model_dir / "config.json").write_text(config.replace('"attention_probs_dropout_prob": 0.1', '"attention_probs_dropout_prob": 0.0'))
    common = dict(max_steps=4, batch_size=8, learning_rate=1e-3, positive_threshold=4.0, device="cpu", precision="fp32")
    caplog.set_level(logging.INFO, logger="anglekit.training.speed.plan")
    class_calls: list[int] = []
    original = BertLayer.forward
    monkeypatch.setattr(BertLayer, "forward", lambda self, *a, **k: class_calls.append(1) or original(self, *a, **k))
    on = train(train_config(model_dir, pair_file, tmp_path / "on", **common))
    assert "packed tokens: 2 encoder layer(s)" in caplog.text
    assert on.speed_swaps is not None and on.speed_swaps["applied"]["packed_tokens"] == {"flag": "pack_tokens", "modules": 2, "classes": ["BertLayer"]}
    assert len(class_calls) == 1  # the guard's reference on its probe: every training step ran packed
    monkeypatch.setattr(BertLayer, "forward", original)
    caplog.clear()
    off = train(train_config(model_dir, pair_file, tmp_path / "off", pack_tokens=False, **common))
    assert "packed tokens" not in caplog.text
    assert off.speed_swaps is not None and off.speed_swaps["skipped"]["packed_tokens"].startswith("off (pack_tokens false")
    trained = [dict(Embedder.from_pretrained(r.model_dir, device="cpu").backbone.state_dict()) for r in (on, off)]
    untrained = dict(Embedder.from_pretrained(model_dir, device="cpu").backbone.state_dict())
    name = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(trained[0][name], untrained[name])  # it trained
    # The two runs sum in different orders, and Adam divides each update by the gradient's own scale,
    # so where a gradient is near zero (the keys' biases: attention ignores them) rounding moves a
    # weight by up to lr a step. Elementwise: within 5e-5, about 1% of the most 4 steps at lr 1e-3 can
    # move a weight (measured up to 1.6e-5 on an AVX-512 EPYC); each tensor that moved: its update within 1%.
    for key, value in trained[0].items():
        torch.testing.assert_close(value, trained[1][key], rtol=1e-4, atol=5e-5, msg=key)
        update_on, update_off = value - untrained[key], trained[1][key] - untrained[key]
        if update_off.abs().max() > 1e-4:
            assert (update_on - update_off).norm() <= 1e-2 * update_off.norm(), key
