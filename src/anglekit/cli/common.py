"""Pieces every command shares: argument types, the model options, renamed flags.

The conventions of the command line live here, so that each command follows them the same way:

- the model is the first positional argument (``MODEL``);
- ``--device``, ``--dtype``, ``--revision``, ``--trust-remote-code`` wherever a model is loaded;
- ``--quiet`` on every command;
- ``--output`` is always a file, ``--output-dir`` always a folder;
- one default batch size for inference (:data:`anglekit.model.DEFAULT_BATCH_SIZE`).

Nothing here imports torch: ``anglekit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from anglekit.model import DEFAULT_BATCH_SIZE

DTYPE_CHOICES = ("fp32", "bf16", "fp16")
"""``--dtype`` values (the same as :data:`anglekit.model.devices.DTYPE_CHOICES`, without importing torch)."""

_DEVICE = re.compile(r"(cpu|mps|cuda(:\d+)?)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def ranged(kind: type, bounds: Any = None) -> Any:
    """argparse type: an int or float within ``bounds`` (an :class:`anglekit.config.Bounds` or
    None), checked when the flag is parsed, so a bad value fails at once with exit 2 and the range
    in the message."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        problem = bounds.problem(value) if bounds is not None else None
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def number(kind: type, minimum: float | None = None, maximum: float | None = None, *, exclusive_minimum: bool = False) -> Any:
    """:func:`ranged` with the range given inline (inclusive unless ``exclusive_minimum``)."""
    from anglekit.config import Bounds

    return ranged(kind, Bounds(minimum, maximum, exclusive_minimum))


def device_name(text: str) -> str:
    """argparse type: cpu, cuda, cuda:N or mps."""
    if not _DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda, cuda:N or mps, got {text!r}")
    return text


def add_model_argument(parser: argparse.ArgumentParser, help: str = "model: hub name, local folder, .gguf file or pypi:NAME") -> None:
    """The model, first positional argument of every command that loads one."""
    parser.add_argument("model", metavar="MODEL", help=help)


def add_loading_options(parser: argparse.ArgumentParser | Any, *, device_default: str | None = None, what: str = "the model", gguf: bool = True) -> None:
    """``--device``, ``--dtype``, ``--revision``, ``--trust-remote-code`` (and ``--gguf-file``)."""
    where = device_default or "the best available: cuda, else mps, else cpu"
    parser.add_argument(
        "--device",
        type=device_name,
        default=device_default,
        metavar="DEVICE",
        help=f"run {what} on cpu, cuda, cuda:N or mps (default: {where})",
    )
    parser.add_argument("--dtype", default=None, choices=DTYPE_CHOICES, help=f"load the weights of {what} in this dtype (default: as stored)")
    parser.add_argument("--revision", default=None, help="hub revision of the model: branch, tag or commit (default: the main branch)")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        default=False,
        help="run the model repository's own code (models such as nomic, jina or gte-v1.5 need it)",
    )
    if gguf:
        parser.add_argument("--gguf-file", default=None, help="load this GGUF file from the model's folder or hub repository")


def add_embedding_options(parser: argparse.ArgumentParser | Any) -> None:
    """How the model embeds: ``--batch-size``, ``--max-length``, ``--pooling``, ``--prompt``."""
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"texts per forward pass (default: {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument("--max-length", type=positive_int, default=None, metavar="N", help="truncate to this many tokens (default: the model's)")
    parser.add_argument("--pooling", default=None, help="override the model's pooling")
    parser.add_argument(
        "--prompt",
        default=None,
        help="prompt template with {text}, or a preset: paper, paper-b, retrieval-query, none (default: the model's)",
    )
    add_long_text_options(parser)


def add_long_text_options(parser: argparse.ArgumentParser | Any) -> None:
    """``--long-text truncate|chunk-mean|chunk-max`` and its window, stride and chunk cap."""
    from anglekit.model.encoding import LONG_TEXT_MODES

    parser.add_argument(
        "--long-text",
        choices=LONG_TEXT_MODES,
        default=None,
        help="texts longer than the window: truncate, or embed overlapping windows and pool their vectors "
        "(chunk-mean, chunk-max; anglekit's substitute for AnglE-RAN) (default: the model's, else truncate)",
    )
    parser.add_argument("--long-text-window", type=positive_int, default=None, metavar="N", help="tokens per chunk (default: --max-length)")
    parser.add_argument("--long-text-stride", type=positive_int, default=None, metavar="N", help="content tokens between chunk starts (default: half a window)")
    parser.add_argument("--long-text-max-chunks", type=positive_int, default=None, metavar="N", help="at most this many chunks per text")


PRECISION_CHOICES = ("auto", "fp32", "bf16")
"""``--precision`` values (:data:`anglekit.model.devices.INFERENCE_PRECISIONS` plus auto)."""


def add_precision_option(parser: argparse.ArgumentParser | Any, *, what: str = "the model") -> None:
    """``--precision auto|fp32|bf16``: what the inference backend computes in."""
    parser.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        default="auto",
        help=f"what {what} computes in: fp32, or bf16 (faster on CPUs with AVX512-BF16 or AMX and on GPUs; "
        "torch: bf16 weights; openvino: its inference precision; onnx: fp32 only). auto: torch, the weights' "
        "stored dtype or --dtype; openvino, the precision the export recorded, else fp32",
    )


def add_quiet(parser: argparse.ArgumentParser | Any, help: str = "no progress bar") -> None:
    parser.add_argument("--quiet", action="store_true", default=False, help=help)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """MODEL and every option of a command that loads a model to embed texts (eval, encode)."""
    add_model_argument(parser)
    add_embedding_options(parser)
    add_loading_options(parser)
    add_precision_option(parser)
    add_quiet(parser)


_LOAD_KEYS = (
    "pooling", "max_length", "prompt", "device", "dtype", "revision", "trust_remote_code", "gguf_file",
    "long_text", "long_text_window", "long_text_stride", "long_text_max_chunks",
)  # fmt: skip


_BACKENDS = {"auto": None, "anglekit": "torch", "torch": "torch", "onnx": "onnx", "openvino": "openvino"}
"""``--backend`` values -> Embedder.from_pretrained's ``backend`` (auto: chosen from the folder)."""


def add_backend_option(parser: argparse.ArgumentParser | Any) -> None:
    """``--backend auto|torch|onnx|openvino``: the inference backend of the model."""
    parser.add_argument(
        "--backend",
        choices=("auto", "torch", "onnx", "openvino"),
        default="auto",
        help="run the model with PyTorch, onnxruntime or OpenVINO (onnx: a folder from 'anglekit export --format onnx'; "
        "openvino: one from '--format openvino' or an ONNX folder; auto: the only weights the folder holds, else torch)",
    )


def model_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """:meth:`anglekit.model.embedder.Embedder.from_pretrained` keyword arguments from the model options
    that ``args`` has."""
    kwargs = {key: getattr(args, key) for key in _LOAD_KEYS if hasattr(args, key)}
    backend = _BACKENDS.get(getattr(args, "backend", "auto"))
    if backend is not None:
        kwargs["backend"] = backend
    if getattr(args, "precision", "auto") != "auto":
        kwargs["precision"] = args.precision
    return kwargs


def note(prog: str, message: str) -> None:
    """``PROG: note: MESSAGE`` on stderr."""
    print(f"{prog}: note: {message}", file=sys.stderr)


class RenamedFlag(argparse.Action):
    """An old spelling of a flag, kept working (hidden from --help): it sets the new flag's dest and
    says once, on stderr, what the flag is now called."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        note(parser.prog, f"{option_string} is now {self.new}")
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_renamed(parser: argparse.ArgumentParser | Any, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """Accept ``old`` as a hidden spelling of ``new`` (same ``dest``); ``nargs=0, const=...`` for a switch."""
    parser.add_argument(old, dest=dest, action=RenamedFlag, new=new, **kwargs)


def add_output_dir(parser: argparse.ArgumentParser | Any, *, help: str, required: bool = False, old: str | None = None, **kwargs: Any) -> None:
    """``--output-dir DIR`` (always a folder), with ``old`` (e.g. ``--out``) kept as a hidden alias."""
    _add_renamable(parser, "--output-dir", "output_dir", "DIR", help=help, required=required, old=old, **kwargs)


def add_output(
    parser: argparse.ArgumentParser | Any,
    *,
    help: str,
    required: bool = False,
    old: str | None = None,
    metavar: str = "FILE",
    **kwargs: Any,
) -> None:
    """``--output FILE`` (always a file), with ``old`` kept as a hidden alias."""
    _add_renamable(parser, "--output", "output", metavar, help=help, required=required, old=old, **kwargs)


def _add_renamable(parser: Any, flag: str, dest: str, metavar: str, *, help: str, required: bool, old: str | None, **kwargs: Any) -> None:
    if old is None:
        parser.add_argument(flag, dest=dest, metavar=metavar, required=required, help=help, **kwargs)
        return
    # One of the two spellings is required, not both: a required mutually exclusive group (whose
    # error names only the visible flag).
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(flag, dest=dest, metavar=metavar, help=help, **kwargs)
    add_renamed(group, old, flag, dest, metavar=metavar, **kwargs)


__all__ = [
    "DTYPE_CHOICES",
    "RenamedFlag",
    "add_backend_option",
    "add_precision_option",
    "add_embedding_options",
    "add_long_text_options",
    "add_loading_options",
    "add_model_argument",
    "add_model_options",
    "add_output",
    "add_output_dir",
    "add_quiet",
    "add_renamed",
    "device_name",
    "model_kwargs",
    "note",
    "number",
    "positive_int",
    "ranged",
]
