"""sentence-transformers modules for what its own modules cannot express; written by ``anglekit export``.

This file travels inside an exported model folder as ``anglekit_modules.py`` (``anglekit export``
sets the two constants below) and is run by sentence-transformers, never by anglekit: load the
folder with ``SentenceTransformer(path, trust_remote_code=True)``. It needs only torch and
sentence-transformers.

- ``AnglekitPooling``: anglekit's poolings, masked like anglekit's: ``cls_avg`` (the mean of the
  first token and the masked mean of the last layer), ``first_last_avg`` (the mean of the masked
  means of the first transformer layer and of the last; needs ``output_hidden_states`` in
  config.json) and ``cls``, ``last_avg``, ``last_max``, ``last_token``.
- ``AnglekitTransformer``: sentence-transformers' Transformer that puts each text into
  ``TEMPLATE`` (at ``{text}``) first, after the AnglE paper's sentence preprocessing when
  ``PREPROCESS`` is true.
"""

from __future__ import annotations

import json
import os

import torch
from torch import nn

TEMPLATE = None
PREPROCESS = False


def preprocess_sentence(text):
    """The AnglE paper's preparation of a sentence for a prompt: a final full stop unless it ends
    in . ? " or ', double quotes to single ones, a final ? to a full stop."""
    if text and text[-1] not in ".?\"'":
        text += "."
    text = text.replace('"', "'")
    if text and text[-1] == "?":
        text = text[:-1] + "."
    return text


def format_text(text):
    """``text`` put into TEMPLATE (preprocessed first when PREPROCESS); unchanged without a template."""
    if TEMPLATE is None or not isinstance(text, str):
        return text
    if PREPROCESS:
        text = preprocess_sentence(text)
    return TEMPLATE.replace("{text}", text)


def _masked_mean(states, mask):
    weights = mask.to(states.dtype).unsqueeze(-1)
    return (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


def _first_token(states, mask):
    index = mask.long().argmax(dim=1)
    return states[torch.arange(states.shape[0], device=states.device), index]


def _last_token(states, mask):
    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0).expand_as(mask)
    index = (positions * mask.long()).argmax(dim=1)
    return states[torch.arange(states.shape[0], device=states.device), index]


def _masked_max(states, mask):
    return states.masked_fill(~mask.bool().unsqueeze(-1), torch.finfo(states.dtype).min).max(dim=1).values


class AnglekitPooling(nn.Module):
    """Token states -> one vector per text, as anglekit pools them."""

    POOLINGS = ("cls", "cls_avg", "last_avg", "last_max", "first_last_avg", "last_token")

    def __init__(self, pooling, dimension):
        super().__init__()
        if pooling not in self.POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(self.POOLINGS)}")
        self.pooling = pooling
        self.dimension = int(dimension)

    def forward(self, features):
        last = features["token_embeddings"]
        mask = features.get("attention_mask")
        if mask is None or mask.shape[:2] != last.shape[:2]:
            mask = torch.ones(last.shape[:2], dtype=torch.long, device=last.device)
        if self.pooling == "cls":
            vector = _first_token(last, mask)
        elif self.pooling == "cls_avg":
            vector = (_first_token(last, mask) + _masked_mean(last, mask)) / 2.0
        elif self.pooling == "last_avg":
            vector = _masked_mean(last, mask)
        elif self.pooling == "last_max":
            vector = _masked_max(last, mask)
        elif self.pooling == "last_token":
            vector = _last_token(last, mask)
        else:
            layers = features.get("all_layer_embeddings")
            if layers is None or len(layers) < 2:
                raise ValueError("first_last_avg needs every layer's states: set output_hidden_states true in config.json")
            vector = (_masked_mean(layers[1], mask) + _masked_mean(last, mask)) / 2.0
        features["sentence_embedding"] = vector
        return features

    def get_sentence_embedding_dimension(self):
        return self.dimension

    def get_embedding_dimension(self):
        return self.dimension

    def get_config_dict(self):
        return {"pooling": self.pooling, "dimension": self.dimension}

    def save(self, output_path, *args, **kwargs):
        os.makedirs(output_path, exist_ok=True)
        with open(os.path.join(output_path, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(self.get_config_dict(), handle, indent=2)

    @staticmethod
    def load(input_path):
        with open(os.path.join(input_path, "config.json"), encoding="utf-8") as handle:
            return AnglekitPooling(**json.load(handle))


from sentence_transformers.base.modules.transformer import Transformer as _Transformer  # noqa: E402 - 5.4+ (the floor)

if hasattr(_Transformer, "preprocess"):

    class AnglekitTransformer(_Transformer):
        """sentence-transformers' Transformer; every text goes into TEMPLATE first."""

        def preprocess(self, inputs, *args, **kwargs):
            return super().preprocess([format_text(item) for item in inputs], *args, **kwargs)

else:  # sentence-transformers < 5.4 tokenizes in ``tokenize``

    class AnglekitTransformer(_Transformer):
        """sentence-transformers' Transformer; every text goes into TEMPLATE first."""

        def tokenize(self, texts, *args, **kwargs):
            return super().tokenize([format_text(item) for item in texts], *args, **kwargs)
