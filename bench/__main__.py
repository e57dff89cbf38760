"""`python -m bench`: run every bench/bench_*.py script in turn with its defaults.

Generic on purpose: a new benchmark is a new bench_*.py file with a main();
nothing here names one. Arguments pick scripts by substring.  Long runs that are not
part of the default set (``soak.py``: root, Mininet, ten minutes) run only when named
exactly: ``python -m bench soak [-- ARGS...]`` (ARGS go to that script).
Exit status is non-zero when any script failed.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _explicit_script(here: Path, name: str) -> bool:
    """``name`` is a runnable bench module outside the default set (has a main())."""
    if name.startswith(("bench_", "_")) or not name.isidentifier():
        return False
    p = here / f"{name}.py"
    return p.exists() and "\ndef main(" in p.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    passed: list[str] = []
    if "--" in args:
        args, passed = args[:args.index("--")], args[args.index("--") + 1:]
    here = Path(__file__).resolve().parent
    scripts = sorted(p.stem for p in here.glob("bench_*.py"))
    explicit = [a for a in args if _explicit_script(here, a)]
    if args:
        scripts = [s for s in scripts if any(a in s for a in args if a not in explicit)]
        scripts += explicit
    failed = []
    for name in scripts:
        print(f"== bench.{name}", flush=True)
        extra = passed if name in explicit else []
        rc = subprocess.call([sys.executable, "-m", f"bench.{name}", *extra], cwd=here.parent)
        if rc:
            failed.append(f"{name} (exit {rc})")
        print(flush=True)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
