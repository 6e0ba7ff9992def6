"""``python -m anglekit``: the command line."""

import sys

from anglekit.cli import main

sys.exit(main())
