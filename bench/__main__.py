"""`python -m bench`: run every bench/bench_*.py script in turn with its defaults.

Generic on purpose: a new benchmark is a new bench_*.py file with a main();
nothing here names one. Exit status is non-zero when any script failed.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    here = Path(__file__).resolve().parent
    scripts = sorted(p.stem for p in here.glob("bench_*.py"))
    if args:
        scripts = [s for s in scripts if any(a in s for a in args)]
    failed = []
    for name in scripts:
        print(f"== bench.{name}", flush=True)
        rc = subprocess.call([sys.executable, "-m", f"bench.{name}"], cwd=here.parent)
        if rc:
            failed.append(f"{name} (exit {rc})")
        print(flush=True)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
