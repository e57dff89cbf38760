"""Run p4c's own v1model STF samples on a softswitch target and count the outcomes.

``python -m softswitch.tools.run_p4c_samples P4C_CHECKOUT [--target python|ebpf]``
reads ``testdata/p4_16_samples/*.p4`` of a p4c checkout (only those that include
``v1model.p4`` and have a ``.stf`` beside them), runs each with ``python -m softswitch
stf`` in a subprocess of its own (a crash or a hang ends one sample, not the run) and
prints one line per sample and the counts by outcome:

* ``pass``: every expectation held;
* ``refused``: the target refused the program, with the reason it printed
  (``unsupported on --target ebpf: ...``);
* ``runt``: the STF sends a frame shorter than an Ethernet header (14 bytes), which
  no tc/XDP program sees; counted before running, on the eBPF target only;
* ``error``: the program or test could not be used (exit status 2, other reasons),
  or it ran past the time limit;
* ``differs``: it ran and some output differed from the STF's expectation.

The samples are read, never copied into the project. ``--only-passing FILE`` limits
the run to the samples named in FILE (e.g. the passes of a Python-target run written
with ``--write-passes``), which is how the eBPF target is measured against the Python
target's set.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from softswitch.stf import parse_packet_hex, parse_stf

ETHERNET_HEADER = 14
_REASON = re.compile(r"unsupported on --target \w+: (.*)")


@dataclass(frozen=True, slots=True)
class Outcome:
    sample: str
    kind: str       # pass | refused | runt | error | differs
    reason: str = ""


def v1model_samples(checkout: Path) -> Iterator[tuple[Path, Path]]:
    """(program, stf) of each v1model sample with an STF test, by name."""
    d = checkout / "testdata" / "p4_16_samples"
    if not d.is_dir():
        raise SystemExit(f"{checkout}: no testdata/p4_16_samples (not a p4c checkout?)")
    for stf in sorted(d.glob("*.stf")):
        prog = stf.with_suffix(".p4")
        if prog.is_file() and "v1model.p4" in prog.read_text(encoding="utf-8", errors="replace"):
            yield prog, stf


def sends_runt(stf: Path) -> bool:
    """True when some ``packet`` line of the STF is shorter than an Ethernet header."""
    try:
        cmds = parse_stf(stf.read_text(encoding="utf-8", errors="replace"), str(stf))
    except Exception:  # noqa: BLE001 - a bad STF is reported by the run itself
        return False
    for c in cmds:
        if c.verb == "packet" and len(c.args) > 1:
            try:
                data, _ = parse_packet_hex(c.args[1:])
            except Exception:  # noqa: BLE001, S112 - the run itself reports bad data
                continue
            if len(data) // 2 < ETHERNET_HEADER:
                return True
    return False


def run_one(prog: Path, stf: Path, target: str, timeout: float) -> Outcome:
    name = prog.stem
    if target == "ebpf" and sends_runt(stf):
        return Outcome(name, "runt", f"a frame under {ETHERNET_HEADER} bytes")
    cmd = [sys.executable, "-m", "softswitch", "stf", "--target", target,
           "-I", str(prog.parent), str(prog), str(stf)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Outcome(name, "error", f"ran past {timeout:g} s")
    if p.returncode == 0:
        return Outcome(name, "pass")
    text = (p.stderr + p.stdout).strip()
    m = _REASON.search(text)
    if m:
        return Outcome(name, "refused", m.group(1).strip())
    last = text.splitlines()[-1] if text else f"exit status {p.returncode}"
    if p.returncode == 1:
        fails = [ln for ln in text.splitlines() if ln.startswith("FAIL ")]
        return Outcome(name, "differs", fails[0] if fails else last)
    return Outcome(name, "error", last[:300])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", type=Path, help="a p4c checkout (or an archive of its testdata/)")
    ap.add_argument("--target", choices=("python", "ebpf"), default="python")
    ap.add_argument("--only-passing", type=Path, metavar="FILE",
                    help="run only the samples named in FILE, one a line")
    ap.add_argument("--write-passes", type=Path, metavar="FILE",
                    help="write the names of the passing samples to FILE")
    ap.add_argument("-k", dest="pattern", help="run only samples whose name contains this")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="samples run at once (default 1)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per sample")
    args = ap.parse_args(argv)

    samples = list(v1model_samples(args.checkout))
    if args.only_passing:
        keep = set(args.only_passing.read_text(encoding="utf-8").split())
        samples = [s for s in samples if s[0].stem in keep]
    if args.pattern:
        samples = [s for s in samples if args.pattern in s[0].stem]
    env_path = os.environ.get("PYTHONPATH", "")
    print(f"# {len(samples)} v1model STF samples on --target {args.target}"
          f"{' (PYTHONPATH=' + env_path + ')' if env_path else ''}", flush=True)
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for o in pool.map(lambda s: run_one(s[0], s[1], args.target, args.timeout), samples):
            outcomes.append(o)
            print(f"{o.kind:8} {o.sample}{': ' + o.reason if o.reason else ''}", flush=True)
    counts = Counter(o.kind for o in outcomes)
    print(f"# {len(outcomes)} samples in {time.monotonic() - t0:.0f} s: "
          + ", ".join(f"{k} {counts[k]}" for k in ("pass", "refused", "runt", "error", "differs")))
    reasons = Counter(o.reason for o in outcomes if o.kind == "refused")
    for reason, n in reasons.most_common():
        print(f"#   refused {n}: {reason}")
    if args.write_passes:
        args.write_passes.write_text("".join(o.sample + "\n" for o in outcomes if o.kind == "pass"),
                                     encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
