"""``python tests/serve/slow_serve.py ANGLEKIT-ARGS...``: the ``anglekit`` command line with each
forward pass of the torch backend held until the file ``$ANGLEKIT_TEST_BATCH_GATE`` exists (when
set) and slowed down by ``$ANGLEKIT_TEST_BATCH_SLEEP`` seconds, so that a test can send SIGTERM
while requests are in flight by construction (the tiny model would finish at once)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from anglekit.cli import main
from anglekit.serve.backends import TorchBackend

_DELAY = float(os.environ.get("ANGLEKIT_TEST_BATCH_SLEEP", "0"))
_GATE = os.environ.get("ANGLEKIT_TEST_BATCH_GATE")
_embed = TorchBackend.embed


def _slow_embed(self: TorchBackend, token_ids: Sequence[Sequence[int]]) -> Any:
    serving = threading.current_thread().name == "anglekit-batcher"  # not the warm-up, which runs before the server is ready
    while _GATE and serving and not os.path.exists(_GATE):  # held until the test opens the gate
        time.sleep(0.01)
    time.sleep(_DELAY)
    return _embed(self, token_ids)


if __name__ == "__main__":
    TorchBackend.embed = _slow_embed  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
