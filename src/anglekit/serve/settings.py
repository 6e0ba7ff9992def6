"""ServeSettings: every setting of ``anglekit serve`` except the model's own (those, the inference
backend among them, are :class:`~anglekit.model.load_settings.LoadSettings`), typed; its flags are
generated from these fields. Nothing here imports torch or fastapi."""

from __future__ import annotations

from dataclasses import dataclass

from anglekit.config import check_fields, setting
from anglekit.errors import ConfigError
from anglekit.model import DEFAULT_BATCH_SIZE

API_KEY_ENV = "ANGLEKIT_API_KEY"
"""Environment variable read for the API key when ``--api-key`` is not given."""


@dataclass
class ServeSettings:
    """How the server listens, batches, bounds requests and authenticates."""

    host: str = setting("127.0.0.1", help="Address to listen on (0.0.0.0: every interface).")
    port: int = setting(8000, minimum=0, maximum=65535, help="TCP port to listen on (0: any free port).")
    served_model_name: str | None = setting(None, help="Model name the API answers to, in requests' 'model' and in /v1/models (default: MODEL as given).")
    max_batch_tokens: int = setting(
        16384,
        minimum=1,
        help="Token budget of the batcher: each step takes the oldest waiting texts up to this many tokens, "
        "and no forward pass holds more padded tokens (a longer text runs alone).",
    )
    max_batch_size: int = setting(DEFAULT_BATCH_SIZE, minimum=1, help="Texts per forward pass at most (small batches are fastest on CPU; raise it on a GPU).")
    max_client_batch: int = setting(2048, minimum=1, help="Inputs per request at most.")
    max_queue: int = setting(32768, minimum=1, help="Texts waiting or being embedded at most; a request beyond it gets 429 with Retry-After.")
    payload_limit: int = setting(4 * 1024 * 1024, minimum=1, help="Request body size limit in bytes.")
    auto_truncate: bool = setting(
        True,
        help="Truncate inputs longer than the model's max length (--no-auto-truncate: reject them, with their token count); a request's "
        "'truncate' or 'truncation' field overrides it.",
    )
    api_key: str | None = setting(None, help=f"Require 'Authorization: Bearer KEY' on the embedding, model and info routes (default: ${API_KEY_ENV}, if set).")
    index: tuple[str, ...] | None = setting(
        None,
        help="Serve an index built by 'anglekit index build' over POST /v1/search: DIR or NAME=DIR (repeatable; NAME "
        "defaults to the folder's name). It must have been built with the served model and settings (checked at start).",
        repeat=True,
    )
    int8_export: bool = setting(
        True,
        help="When MODEL is a folder of PyTorch weights holding an int8 export of them (a subfolder written by 'anglekit export "
        "--quantize int8|int8-static' from these weights and settings), serve the fastest such graph (OpenVINO static int8, "
        "else ONNX int8, else OpenVINO int8 weights: several times faster on CPUs; its agreement check is announced) instead "
        "of the PyTorch weights. Only with --backend auto, on the CPU, with the model's own dtype and precision, without "
        "--index (an index is queried with the model it was built with), and not for models trained with ESE (their "
        "requests may choose a layer). --no-int8-export: the PyTorch weights.",
    )
    warmup_seconds: float = setting(
        5.0,
        minimum=0,
        help="At start, for a runtime that prepares its kernels per input shape (OpenVINO), run the shapes small batches "
        "take for at most this long, so that the first requests do not pay for them (0: only two warm-up passes).",
    )
    ui: bool = setting(
        True,
        help="Answer GET / with a page to try the model in a browser: compare sentences (a similarity matrix) and search the "
        "served indexes. It ships with the package and loads nothing from elsewhere (--no-ui: GET / answers 404).",
    )
    threads: int | None = setting(None, minimum=1, help="CPU threads of the backend (default: torch's, usually one per core).")
    quiet: bool = setting(False, help="No access log (one line per request).")

    def __post_init__(self) -> None:
        check_fields(self)
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be between 0 and 65535, got {self.port}")
        for name in ("max_batch_tokens", "max_batch_size", "max_client_batch", "max_queue", "payload_limit"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be >= 1, got {self.threads}")
        if self.max_client_batch > self.max_queue:
            raise ConfigError(f"max_client_batch ({self.max_client_batch}) may not exceed max_queue ({self.max_queue})")
        self.index = tuple(self.index or ())
        for spec in self.index:
            if not spec.strip() or spec.endswith("=") or spec.startswith("="):
                raise ConfigError(f"index must be DIR or NAME=DIR, got {spec!r}")
        if self.api_key is not None and not self.api_key.strip():
            raise ConfigError("api_key may not be empty")


__all__ = ["API_KEY_ENV", "ServeSettings"]
