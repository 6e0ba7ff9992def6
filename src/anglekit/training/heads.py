"""Training-only heads: SimCSE's MLP over the pooled vector (``mlp_head: true``).

Unsupervised SimCSE trains with an MLP (dense hidden -> hidden, then tanh; BERT's pooler
shape) on top of the [CLS] vector and drops it at test time ("mlp_only_train"); SimACE follows
it. :class:`TrainingModel` wraps the :class:`~anglekit.model.embedder.Embedder`: in training mode its
forward pass applies the head, in eval mode (and in ``encode``) it does not. The head lives in
the trainer's model, so it is optimised, checkpointed and restored on resume, but
``Embedder.save_pretrained`` never sees it: the saved model is the plain embedder.

The head applies to whatever pooling the embedder uses (SimCSE: ``cls``).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

__all__ = ["MLPHead", "TrainingModel"]


class MLPHead(nn.Module):
    """``tanh(W v + b)``, W [dim, dim]; initialised as BERT initialises linears (N(0, 0.02), b = 0),
    as SimCSE's ``cls_init`` does."""

    def __init__(self, dim: int, *, init_std: float = 0.02) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.activation = nn.Tanh()
        nn.init.normal_(self.dense.weight, mean=0.0, std=init_std)
        nn.init.zeros_(self.dense.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.activation(self.dense(x.to(self.dense.weight.dtype)))


class TrainingModel(nn.Module):
    """An embedder plus a head used in training mode only."""

    def __init__(self, embedder: Any, head: nn.Module) -> None:
        super().__init__()
        self.embedder = embedder
        self.head = head

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        vectors = self.embedder(input_ids=input_ids, attention_mask=attention_mask)
        return self.head(vectors) if self.training else vectors

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        """The embedder's ``encode`` (never the head)."""
        return self.embedder.encode(*args, **kwargs)

    def encode_query(self, *args: Any, **kwargs: Any) -> Any:
        """The embedder's ``encode_query`` (its query prompt; never the head)."""
        return self.embedder.encode_query(*args, **kwargs)

    def encode_document(self, *args: Any, **kwargs: Any) -> Any:
        """The embedder's ``encode_document`` (its document prompt; never the head)."""
        return self.embedder.encode_document(*args, **kwargs)
