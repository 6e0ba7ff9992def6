"""BERT-style encoder layers over the real tokens of a batch only (``pack_tokens``).

A padded batch of B texts of up to L tokens runs every linear layer, layer norm, GELU and dropout of
an encoder layer over B x L rows, padding included: on anglekit's length-grouped STS-B batches
(MiniLM's tokenizer, 64 texts a batch) that is 1.10x the real tokens, more on random batches, and on
a CPU those matmuls are most of the step (packed, MiniLM's pass is 1.04-1.07x faster on those
batches: ``benchmarks/bench_packed_layers.py``). :func:`packed_layer_forward` runs one encoder
layer the way its class does, but gathers the real tokens first: the query, key and value
projections, the attention output projection, the feed-forward block, their dropouts and norms run
over the real tokens only; the projections are scattered back to the padded layout for the
attention itself, which runs through the same attention function (SDPA or eager, with the same
mask) as the class's; the layer's output is returned padded (zeros on padding rows, which no real
token attends to and no pooling reads).

Real-token outputs equal the class's (each matmul row is computed from its own row; the check
below allows float32 rounding of a differently blocked matmul). Dropout masks are drawn over the
real tokens only: the same distribution, other draws than the padded forward's for a given seed.

:func:`packed_layers` gives every layer of a class in :data:`LAYER_CLASSES` this forward for the
length of the training loop and puts the class's own back afterwards, whatever happens; the first
layer of each class must first compute the same as its class on a padded probe batch. A call the
packed path does not cover (a decoder, cross-attention, a key/value cache, feed-forward chunking,
attention weights asked for, a mask it cannot read, a batch without padding) runs the class's own
forward. Measured on CPUs only, so used on CPUs only.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor, nn

from anglekit.training.speed.forward_swaps import imported_classes, on_cpus

LAYER_CLASSES: tuple[tuple[str, str], ...] = (
    ("transformers.models.bert.modeling_bert", "BertLayer"),
    ("transformers.models.roberta.modeling_roberta", "RobertaLayer"),
    ("transformers.models.xlm_roberta.modeling_xlm_roberta", "XLMRobertaLayer"),
)
"""(module, class) of the encoder layers built like BERT's: ``attention.self.{query,key,value}``,
``attention.output(dense, dropout, LayerNorm)``, ``intermediate`` and ``output`` (post-norm)."""

PASSED_THROUGH = frozenset({"position_ids", "output_hidden_states"})
"""Keyword arguments the encoder hands every layer that the packed path passes on whatever their
value, as the class does (hidden states are recorded from the layers' padded outputs); any other
is covered only when None or False (nothing asked of the class)."""


def real_tokens(attention_mask: Any, batch: int, length: int) -> Tensor | None:
    """The (batch, length) bool mask of real tokens read from the mask a layer receives: a 2D
    padding mask (truthy on real tokens), or a bidirectional 4D one of shape (batch, 1, queries,
    length), boolean (True: attend) or additive (0: attend, the dtype's minimum: masked). None
    when there is no mask or it is none of these."""
    if not isinstance(attention_mask, Tensor):
        return None
    mask = attention_mask
    if mask.dim() == 2 and tuple(mask.shape) == (batch, length):
        return mask.bool()
    if mask.dim() != 4 or mask.shape[0] != batch or mask.shape[1] != 1 or mask.shape[-1] != length:
        return None
    row = mask[:, 0, 0, :]
    if row.dtype == torch.bool:
        return row
    if not row.is_floating_point():
        return None
    attend, masked = row == 0, row <= torch.finfo(row.dtype).min / 2
    return attend if bool((attend | masked).all()) else None


def _covered(layer: nn.Module, encoder_hidden_states: Any, encoder_attention_mask: Any, cache: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a call is one the packed path computes as the class does."""
    attention = getattr(layer, "attention", None)
    self_attention = getattr(attention, "self", None)
    if self_attention is None or getattr(layer, "is_decoder", True) or getattr(self_attention, "is_causal", True):
        return False
    if getattr(layer, "chunk_size_feed_forward", 0) or getattr(attention, "is_cross_attention", False):
        return False
    if encoder_hidden_states is not None or encoder_attention_mask is not None or cache is not None:
        return False
    return all(value is None or value is False or key in PASSED_THROUGH for key, value in kwargs.items())


def _attention_function(self_attention: nn.Module) -> Any:
    """The attention function the class's forward calls: the configured implementation, else the
    model file's own eager one."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    eager = sys.modules[type(self_attention).__module__].eager_attention_forward
    return ALL_ATTENTION_FUNCTIONS.get_interface(self_attention.config._attn_implementation, eager)


def packed_layer_forward(
    self: nn.Module,
    hidden_states: Tensor,
    attention_mask: Tensor | None = None,
    encoder_hidden_states: Tensor | None = None,
    encoder_attention_mask: Tensor | None = None,
    cache: Any = None,
    **kwargs: Any,
) -> Tensor:
    """One BERT-style encoder layer over the real tokens of ``hidden_states`` (batch, length,
    hidden); the output padded like the input (module doc). Calls it does not cover run the class's
    own forward."""
    batch, length, hidden = hidden_states.shape
    keep = real_tokens(attention_mask, batch, length)
    if keep is None or bool(keep.all()) or not _covered(self, encoder_hidden_states, encoder_attention_mask, cache, kwargs):
        return type(self).forward(self, hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask, cache=cache, **kwargs)
    rows = keep.reshape(-1).nonzero().squeeze(1)
    tokens = hidden_states.reshape(batch * length, hidden).index_select(0, rows)
    attention = self.attention.self

    def padded_heads(projection: nn.Module) -> Tensor:  # (tokens, width) -> (batch, heads, length, head size)
        values = projection(tokens)
        full = values.new_zeros(batch * length, values.shape[-1]).index_copy(0, rows, values)
        return full.view(batch, length, -1, attention.attention_head_size).transpose(1, 2)

    attended, _ = _attention_function(attention)(
        attention,
        padded_heads(attention.query),
        padded_heads(attention.key),
        padded_heads(attention.value),
        attention_mask,
        dropout=0.0 if not attention.training else attention.dropout.p,
        scaling=attention.scaling,
        **kwargs,
    )
    attended = attended.reshape(batch * length, -1).index_select(0, rows)
    attention_output = self.attention.output(attended, tokens)
    layer_output = self.output(self.intermediate(attention_output), attention_output)
    return layer_output.new_zeros(batch * length, layer_output.shape[-1]).index_copy(0, rows, layer_output).view(batch, length, -1)


def packed_agrees(layer: nn.Module) -> bool:
    """Whether the class's forward and :func:`packed_layer_forward` give the same real-token outputs
    (rounding allowed: 1e-5 in float32, 2e-2 for half weights) on a padded probe batch with this
    layer's weights, the mask built as the model builds it, in eval mode (no dropout): a guard
    against a transformers release that changes the layer under the same class name."""
    from transformers.masking_utils import create_bidirectional_mask

    if not _covered(layer, None, None, None, {}):
        raise TypeError("a decoder, cross-attention or chunked layer: the packed path covers encoder layers only")
    attention = getattr(getattr(layer, "attention", None), "self", None)
    weight = getattr(getattr(attention, "query", None), "weight", None)
    if not isinstance(weight, Tensor) or getattr(attention, "config", None) is None:
        return False
    generator = torch.Generator().manual_seed(0)
    probe = torch.randn(3, 6, weight.shape[-1], generator=generator).to(weight.device, weight.dtype)
    padding = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], device=weight.device)
    mask = create_bidirectional_mask(config=attention.config, inputs_embeds=probe, attention_mask=padding)
    keep = real_tokens(mask, 3, 6)
    if keep is None or bool(keep.all()):
        return False
    was_training = layer.training
    layer.eval()
    try:
        with torch.no_grad():
            reference = type(layer).forward(layer, probe, mask)
            packed = packed_layer_forward(layer, probe, mask)
    finally:
        layer.train(was_training)
    if not isinstance(reference, Tensor) or reference.shape != packed.shape:
        return False
    real = padding.bool()
    tolerance = 2e-2 if weight.dtype in (torch.bfloat16, torch.float16) else 1e-5  # half weights: rounding of other blockings
    return bool(torch.allclose(packed[real].float(), reference[real].float(), rtol=10 * tolerance, atol=tolerance))


def packed_layers(model: nn.Module, *, enabled: bool, device: torch.device | str) -> AbstractContextManager[int]:
    """For the body, every layer of ``model`` whose class is one of :data:`LAYER_CLASSES` (exactly)
    runs :func:`packed_layer_forward` (on CPUs, when ``enabled``); yields how many do."""
    classes = imported_classes(LAYER_CLASSES)
    done = "encoder layer(s) run their matmuls over the real tokens only"
    return on_cpus(model, enabled=enabled, device=device, classes=classes, forward=packed_layer_forward, agrees=packed_agrees,
                   label="packed tokens", done=done)  # fmt: skip


__all__ = ["LAYER_CLASSES", "packed_agrees", "packed_layer_forward", "packed_layers", "real_tokens"]
