import sys

from quantemu.cli import main

sys.exit(main())
