"""``python -m ebpf`` runs the host agent (same as ``python -m ebpf.agent``)."""

import sys

from ebpf.agent import main

sys.exit(main())
