"""``python -m mininet_topos``: see :mod:`mininet_topos.cli`."""
import sys

from mininet_topos.cli import main

if __name__ == "__main__":
    sys.exit(main())
