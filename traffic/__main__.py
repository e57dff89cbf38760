"""Entry point of ``python -m traffic``."""
from traffic.cli import main

raise SystemExit(main())
