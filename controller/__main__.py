"""``python -m controller``: see controller.cli."""
import sys

from controller.cli import main

sys.exit(main())
