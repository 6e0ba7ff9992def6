"""``python -m anglekit.cli``: the command line (the same as ``python -m anglekit``)."""

import sys

from anglekit.cli import main

sys.exit(main())
