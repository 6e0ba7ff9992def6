"""Early exit: run a backbone's first ``n`` transformer blocks only (ESE's layer truncation, cheaper).

:func:`hidden_states_to` returns what ``output_hidden_states=True`` would give for layers 1..n
without running the blocks after layer n: forward hooks record the output of each of the first n
blocks and the n-th one stops the forward pass. The blocks are found without knowing the
architecture: the module list whose length is the config's ``num_hidden_layers`` (BERT's
``encoder.layer``, Llama's ``layers``, ...). Layer n's hidden state is the block's own output, as
transformers records it for every layer but the last (whose recorded state may carry a final norm:
the last layer is therefore never run through here).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from anglekit.errors import ConfigError


class _Stop(Exception):
    """Raised by the n-th block's hook: the forward pass ends there."""


def layer_blocks(backbone: nn.Module) -> nn.ModuleList:
    """The backbone's transformer blocks in order: the ModuleList of ``num_hidden_layers`` modules
    (a ConfigError when there is none, or more than one)."""
    count = getattr(getattr(backbone, "config", None), "num_hidden_layers", None)
    if not isinstance(count, int) or count < 1:
        raise ConfigError(f"{type(backbone).__name__}: the config has no num_hidden_layers, so its blocks cannot be found")
    found = [m for m in backbone.modules() if isinstance(m, nn.ModuleList) and len(m) == count]
    if len(found) != 1:
        raise ConfigError(
            f"{type(backbone).__name__}: expected one list of {count} transformer blocks, found {len(found)}; early exit is not available for this architecture"
        )
    return found[0]


def _hidden(output: Any) -> Tensor:
    """A block's hidden state: the output itself or its first element (tuples of older transformers)."""
    return output[0] if isinstance(output, (tuple, list)) else output


def hidden_states_to(backbone: nn.Module, layer: int, **inputs: Any) -> tuple[Tensor | None, ...]:
    """``(None, h_1, ..., h_layer)``: the outputs of the first ``layer`` blocks of ``backbone`` run on
    ``inputs`` (index 0, the embedding output, is not recorded); the blocks after ``layer`` do not run.
    ``layer`` must be below the number of blocks (the last layer is an ordinary forward pass)."""
    blocks = layer_blocks(backbone)
    if not 1 <= layer < len(blocks):
        raise ConfigError(f"early exit needs a layer between 1 and {len(blocks) - 1}, got {layer}")
    states: list[Tensor | None] = [None]

    def record(index: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            states.append(_hidden(output))
            if index == layer - 1:
                raise _Stop

        return hook

    handles = [blocks[i].register_forward_hook(record(i)) for i in range(layer)]
    try:
        backbone(**inputs)
    except _Stop:
        pass
    else:  # pragma: no cover - a block list the forward pass does not go through
        raise ConfigError(f"{type(backbone).__name__}: the forward pass did not reach layer {layer}'s block")
    finally:
        for handle in handles:
            handle.remove()
    if len(states) != layer + 1:
        raise ConfigError(f"{type(backbone).__name__}: recorded {len(states) - 1} block outputs for layer {layer}")
    return tuple(states)


__all__ = ["hidden_states_to", "layer_blocks"]
