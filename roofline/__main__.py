"""``python -m roofline``: the ``roofline`` command, for an environment whose scripts are not on PATH."""

import sys

from roofline.cli import main

sys.exit(main())
