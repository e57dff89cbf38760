"""Processes of the soak from /proc: who they are and what they use (RSS, CPU).

Why /proc: the test bed starts processes in several ways (Mininet node shells, switch
processes in their own sessions, delay lines behind ``ip netns exec``), but every one
of them descends from the bench process, so one walk of ``/proc/*/stat`` parent links
finds them all, including anything they start themselves.  A kind is read from the
command line (``python -m softswitch`` -> switch, ...); node shells and helpers that
run for a moment are "shell" and left out of the verdicts.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KINDS", "ProcSample", "ProcTable", "classify", "descendants", "read_usage"]

#: the kinds the soak reports, in report order
KINDS = ("switch", "controller", "agent", "traffic", "wan", "sampler", "influxd", "other")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")
# python -m <module> -> kind
_MODULES = {"softswitch": "switch", "controller": "controller", "ebpf.agent": "agent",
            "traffic": "traffic", "mininet_topos.delayline": "wan",
            "mininet_topos.testbed.sampler": "sampler"}


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (which may hold spaces)."""
    try:
        raw = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def descendants(root: int, *, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of every living descendant of ``root`` (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir() if proc.exists() else ():
        if not entry.name.isdigit():
            continue
        f = _stat_fields(int(entry.name), proc)
        if f is None:
            continue
        children.setdefault(int(f[1]), []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(out)


def cmdline(pid: int, *, proc: Path = Path("/proc")) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _opt(argv: list[str], *names: str) -> str | None:
    for i, a in enumerate(argv[:-1]):
        if a in names:
            return argv[i + 1]
    return None


def classify(argv: list[str]) -> tuple[str, str]:
    """(kind, name) of a command line; kind "shell" for what the soak does not judge."""
    if not argv:
        return "shell", ""
    exe = os.path.basename(argv[0])
    if exe == "influxd":
        return "influxd", "influxd"
    if "-m" in argv[:3]:
        module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
        kind = _MODULES.get(module)
        if kind == "switch":
            return kind, _opt(argv, "--name") or "?"
        if kind == "agent":
            iface = _opt(argv, "--iface") or "?"
            return kind, iface.split("-")[0]
        if kind == "traffic":
            out = _opt(argv, "-o", "--out")
            return kind, Path(out).stem if out else f"rank{_opt(argv, '--rank')}"
        if kind == "wan":
            return kind, f"{_opt(argv, '--a')}-{_opt(argv, '--b')}"
        if kind is not None:
            return kind, kind
        return "other", module
    if exe.startswith("python"):
        return "other", " ".join(argv[1:3])
    return "shell", exe


def read_usage(pid: int, *, proc: Path = Path("/proc")) -> tuple[int, float] | None:
    """(RSS bytes, CPU seconds used so far) of ``pid``; None when it is gone."""
    f = _stat_fields(pid, proc)
    if f is None or f[0] in ("Z", "X"):  # gone, or exited and not yet reaped (RSS 0)
        return None
    # after the name: state(0) ppid(1) ... utime(11) stime(12) ... rss(21) in pages
    return int(f[21]) * _PAGE, (int(f[11]) + int(f[12])) / _TICK


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcSample:
    t_s: float
    pid: int
    kind: str
    name: str
    rss_bytes: int
    cpu_pct: float      # over the time since this process's previous sample


class ProcTable:
    """Samples every judged descendant of ``root``; remembers each PID's kind and last
    CPU time so CPU is a rate between samples."""

    def __init__(self, root: int, *, proc: Path = Path("/proc")) -> None:
        self.root = root
        self.proc = proc
        self.known: dict[int, tuple[str, str]] = {}
        self.last: dict[int, tuple[float, float]] = {}

    def sample(self, t_s: float) -> list[ProcSample]:
        out = []
        for pid in descendants(self.root, proc=self.proc):
            who = self.known.get(pid)
            if who is None:
                who = classify(cmdline(pid, proc=self.proc))
                if who[0] == "shell" and who[1] in ("mnexec", "ip"):
                    continue  # exec()s into the real program: classify it next time
                self.known[pid] = who
            if who[0] == "shell":
                continue
            use = read_usage(pid, proc=self.proc)
            if use is None:
                continue
            rss, cpu_s = use
            prev = self.last.get(pid)
            cpu = 0.0 if prev is None or t_s <= prev[0] else \
                100.0 * (cpu_s - prev[1]) / (t_s - prev[0])
            self.last[pid] = (t_s, cpu_s)
            out.append(ProcSample(t_s=t_s, pid=pid, kind=who[0], name=who[1], rss_bytes=rss,
                                  cpu_pct=cpu))
        return out
