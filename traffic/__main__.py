"""Entry point of ``python -m traffic``."""
import os
import sys

from traffic.cli import main

rc = main()
if rc == 130:
    # interrupted (SIGTERM/SIGINT): the summary is written and every socket closed;
    # skip the interpreter's module teardown (0.1-0.2 s idle, seconds on a loaded
    # host), so a rank always ends within a second of the signal
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
raise SystemExit(rc)
