"""`python -m bench`: run every bench/bench_*.py script in turn with its defaults.

Generic on purpose: a new benchmark is a new bench_*.py file with a main();
nothing here names one. Arguments pick scripts by substring.  Long runs that are not
part of the default set (``soak.py``: root, Mininet, ten minutes) run only when named
exactly: ``python -m bench soak [ARGS...]`` (ARGS go to that script, as do those
after ``--``).
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


def _usage(here: Path) -> str:
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    extra = sorted(p.stem for p in here.glob("*.py") if _explicit_script(here, p.stem))
    return ("usage: python -m bench [PATTERN ...]       bench_*.py scripts (all, or those "
            "whose name contains a PATTERN)\n"
            "       python -m bench SCRIPT [ARGS ...]   one script outside the default set, "
            "with its ARGS\n\n"
            f"default set: {', '.join(names)}\n"
            f"outside it (named exactly): {', '.join(extra) or '-'}\n"
            "a script's own options: python -m bench.NAME --help")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    here = Path(__file__).resolve().parent
    if args[:1] in (["-h"], ["--help"]):
        print((__doc__ or "").strip() + "\n\n" + _usage(here))
        return 0
    passed: list[str] = []
    if "--" in args:
        args, passed = args[:args.index("--")], args[args.index("--") + 1:]
    # what follows a script outside the default set is that script's (``soak
    # --minutes 10``), as what follows ``--`` is
    for i, a in enumerate(args):
        if _explicit_script(here, a):
            args, passed = args[:i + 1], args[i + 1:] + passed
            break
    unknown = [a for a in args if a.startswith("-")]
    if unknown:
        print(f"python -m bench: {' '.join(unknown)}: options belong to one script "
              f"(python -m bench.NAME {' '.join(unknown)})\n\n{_usage(here)}",
              file=sys.stderr)
        return 2
    scripts = sorted(p.stem for p in here.glob("bench_*.py"))
    explicit = [a for a in args if _explicit_script(here, a)]
    if args:
        scripts = [s for s in scripts if any(a in s for a in args if a not in explicit)]
        scripts += explicit
    if not scripts:
        print(f"python -m bench: no script matches {' '.join(args)}\n\n{_usage(here)}",
              file=sys.stderr)
        return 2
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
