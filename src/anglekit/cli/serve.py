"""``anglekit serve MODEL``: an OpenAI-compatible embedding server with dynamic batching. The
server's flags are generated from :class:`~anglekit.serve.settings.ServeSettings`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from anglekit.cli.common import EMBEDDING, LOADING, add_load_settings, add_model_argument, load_settings
from anglekit.cli.fields import add_settings, overrides
from anglekit.errors import ConfigError
from anglekit.serve.settings import API_KEY_ENV, ServeSettings

NAME = "serve"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
        help="serve a model over HTTP: OpenAI /v1/embeddings with dynamic batching",
        description="Serve a model over HTTP: POST /v1/embeddings (OpenAI; quantized encoding formats, per-request layer of ESE models), "
        "POST /v1/search (the indexes given with --index), POST /embed, GET /v1/models, GET /v1/info, "
        "GET / (a page to try the model: --no-ui turns it off), "
        "GET /health, GET /metrics. Concurrent requests share length-ordered batches. SIGTERM drains "
        "the requests in flight and exits 0. Needs the 'serve' extra: pip install 'anglekit[serve]'.",
    )
    add_model_argument(parser)
    add_load_settings(parser.add_argument_group("model"), ("backend", *LOADING, "precision", *EMBEDDING))
    settings = add_settings(parser.add_argument_group("server"), ServeSettings)
    parser.set_defaults(_settings=settings)
    return parser


OPENMP_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def passive_openmp() -> None:
    """``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets how OpenMP threads wait, before torch
    loads its OpenMP runtime. By default idle OpenMP threads spin for milliseconds after each
    operation; a server shares its cores with its event loop, its clients and other processes, and
    spinning threads then take the time the thread they wait for needs (on a busy 2-core machine a
    forward pass became several times slower)."""
    if "torch" not in sys.modules and not any(name in os.environ for name in OPENMP_WAIT_VARIABLES):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def run(args: argparse.Namespace) -> int:
    values = overrides(args, args._settings)
    if "api_key" not in values and os.environ.get(API_KEY_ENV):
        values["api_key"] = os.environ[API_KEY_ENV]
    settings = ServeSettings(**values)
    try:
        from anglekit.serve.backends import load_backend
        from anglekit.serve.server import serve
    except ImportError as exc:
        raise ConfigError(f"anglekit serve needs the 'serve' extra ({exc.name} is missing): pip install 'anglekit[serve]'") from None
    load_options = load_settings(args)
    name = settings.served_model_name or args.model

    passive_openmp()

    def announce(line: str) -> None:
        print(f"anglekit serve: {line}", file=sys.stderr, flush=True)

    def load() -> Any:
        # An index records the fingerprint of the model it was built with: its queries are embedded by that model.
        return load_backend(
            load_options.backend,
            args.model,
            threads=settings.threads,
            settings=load_options,
            int8_export=settings.int8_export and not settings.index,
            announce=announce,
        )

    serve(settings, load, model_name=name, announce=announce)
    return 0
