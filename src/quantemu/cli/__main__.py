"""``python -m quantemu.cli``, the same as ``quantemu``."""

import sys

from quantemu.cli import main

sys.exit(main())
