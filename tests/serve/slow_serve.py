"""``python tests/serve/slow_serve.py ANGLEKIT-ARGS...``: the ``anglekit`` command line with each
forward pass of the torch backend slowed down by ``$ANGLEKIT_TEST_BATCH_SLEEP`` seconds, so that a
test can send SIGTERM while requests are reliably in flight (the tiny model would finish at once)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from anglekit.cli import main
from anglekit.serve.backends import TorchBackend

_DELAY = float(os.environ.get("ANGLEKIT_TEST_BATCH_SLEEP", "0"))
_embed = TorchBackend.embed


def _slow_embed(self: TorchBackend, token_ids: Sequence[Sequence[int]]) -> Any:
    time.sleep(_DELAY)
    return _embed(self, token_ids)


if __name__ == "__main__":
    TorchBackend.embed = _slow_embed  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
