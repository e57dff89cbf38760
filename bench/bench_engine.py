"""The native engine against the Python endpoint and the path's limit (issue #23 targets).

Every figure is a ratio within one run:

* **cpu**: CPU time per data packet, sender and receiver processes together:
  ``tn_write_bw``'s from wait4, the runner's ranks' ``cpu_s`` (every thread of the
  process from the start to the end of its run, payload generation included), native
  / Python (target <= 1/5); ``blast`` the same for the batched UDP blast below, per
  datagram delivered: the kernel's cost of one datagram between two UDP sockets, the
  floor of any endpoint built on them, read against the target as ``blast/py``.
* **goodput**: one unpaced QP, 1 MiB messages, receiver goodput, on loopback and
  through a veth pair between two network namespaces, at 1 KiB and 4 KiB MTU:
  ``engine`` is the engine alone (``traffic/native/bin/tn_write_bw``), ``runner`` the
  engine under ``python -m traffic p2p --engine native`` (its Python side generates
  every message's pseudo-random payload, ~3 ms per MiB, and checks completions),
  ``python`` the Python endpoint (``--engine python``), ``blast`` a batched UDP blast
  of the same frames on the same path (``traffic/native/bin/tn_udp_blast``:
  sendmmsg/recvmmsg of MTU + 16-byte datagrams, no transport, received rate).
  Targets: engine / python >= 3, engine / blast >= 0.8.
* **gso**: the engine and the runner once more with UDP segmentation offload on both
  ends (``tn_write_bw --gso``, ``TN_ENGINE_GSO=1``): a QP's same-size frames leave in
  one send and are read back coalesced, one trip through the kernel per run of up to 64
  frames; the same wire packets, for paths without tc programs on the hosts.
* **pacing**: a QP paced at 10k and 100k packets/s through the veth pair, captured by
  tcpdump with kernel nanosecond timestamps leaving the sender's interface (the
  departures) and entering the receiver's: median inter-departure gap against size /
  rate (target within 2 %), p99 of |gap - size / rate| (target <= 20 us) and the share
  of bursts (gaps under a quarter of the ideal), for both engines, with the sender
  engine's own count of departures more than 20 us late, its engine thread's CPU and
  spin time per second of pacing and how long its spin budget was spent (the median
  lead), the receiving engine's CPU and receive poll; and the engine thread's CPU while
  its one QP is idle (``idle``).  ``--pacing-base DIR`` with ``@base`` rows measures
  another checkout's code (a baseline) in the same run.  The ``floor`` row is this
  host's pacing floor in the same run: ``tn_udp_blast --pps``, a thread that spins on
  the clock through every gap and sends one frame of the same size at each departure
  time, no transport, no sleep.  What its gaps miss (a timer tick, an interrupt, a
  hypervisor taking the CPU) no software pacer on this host can avoid: the engine's p99
  is read against it.
* **rtt**: the QP's RTT samples against the wire RTT of a capture (each ACK's arrival
  minus the first departure of the PSN it acknowledges) on a veth port shaped by HTB
  at 40 Mbit/s as the eBPF switches shape theirs, for both engines.

Run it alone on the machine (timing): ``flock /tmp/bench.lock python -m bench.bench_engine``.
Needs root for the veth pair (``--no-veth`` skips those rows) and the native engine
built (``make -C traffic/native``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BLAST = ROOT / "traffic" / "native" / "bin" / "tn_udp_blast"
WRITE_BW = ROOT / "traffic" / "native" / "bin" / "tn_write_bw"
SUFFIX = f"h23e{os.getpid() % 10000}"
NS_A, NS_B = f"tnba{SUFFIX}", f"tnbb{SUFFIX}"
VETH_A, VETH_B = f"tva{SUFFIX}"[:15], f"tvb{SUFFIX}"[:15]
VETH_IPS = ("10.223.7.1", "10.223.7.2")
LO_IPS = ("127.0.91.1", "127.0.91.2")
WIRE_OVERHEAD = 42
DATA_OPS = {0x04, 0x06, 0x07, 0x08, 0x0A}


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check)


def veth_up() -> None:
    _sh("ip", "netns", "add", NS_A)
    _sh("ip", "netns", "add", NS_B)
    _sh("ip", "link", "add", VETH_A, "netns", NS_A, "type", "veth", "peer", "name", VETH_B,
        "netns", NS_B)
    for ns, dev, ip in ((NS_A, VETH_A, VETH_IPS[0]), (NS_B, VETH_B, VETH_IPS[1])):
        _sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
        _sh("ip", "-n", ns, "link", "set", dev, "mtu", "9000", "up")
        _sh("ip", "-n", ns, "link", "set", "lo", "up")


def veth_down() -> None:
    for ns in (NS_A, NS_B):
        _sh("ip", "netns", "del", ns, check=False)


def _prefix(ns: str | None) -> list[str]:
    return ["ip", "netns", "exec", ns] if ns else []


def run_p2p(engine: str, *, veth: bool, nbytes: int, mtu: int, rate: str,
            msg: int = 1 << 20, env: dict | None = None, extra: list[str] | None = None,
            root: Path = ROOT) -> dict:
    """One p2p transfer (rank 0 -> rank 1, one QP); both rank summaries.  ``root``: the
    checkout whose code runs (another one: a baseline in the same run)."""
    ips = VETH_IPS if veth else LO_IPS
    nss = (NS_A, NS_B) if veth else (None, None)
    out = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    count = max(1, nbytes // msg)
    start_at = time.time() + 1.5
    env = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    procs = []
    for r in (1, 0):
        cmd = [*_prefix(nss[r]), sys.executable, "-m", "traffic", "p2p", "--hosts",
               ",".join(ips), "--rank", str(r), "-s", str(msg), "-c", str(count), "--rate", rate,
               "--mtu", str(mtu), "--window", "1024", "--inflight", "8", "--engine", engine,
               "--start-at", f"{start_at:.3f}", "--timeout", "120", "-o",
               str(out / f"r{r}.json"), *(extra or [])]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=root, env=env))
    for p in procs:
        _, err = p.communicate(timeout=200)
        if p.returncode:
            raise RuntimeError(f"p2p {engine}: rank exited {p.returncode}: {err[-800:]}")
    s0 = json.loads((out / "r0.json").read_text())
    s1 = json.loads((out / "r1.json").read_text())
    pkts = sum(q["tx_data_pkts"] for q in s0["endpoint"]["requesters"].values())
    return {"engine": s0["engine"], "goodput_bps": s1["goodput_rx_bps"],
            "counters": s0.get("endpoint", {}).get("engine"),
            "rx_counters": s1.get("endpoint", {}).get("engine"),
            "requester": next(iter(s0["endpoint"]["requesters"].values())),
            "cpu_s": s0["cpu_s"] + s1["cpu_s"], "data_pkts": pkts,
            "retx": sum(q["retx_pkts"] for q in s0["endpoint"]["requesters"].values())}


def _run_rusage(cmd: list[str]) -> tuple[str, float]:
    """Run ``cmd``; its stdout and CPU seconds (user + system, from wait4)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise RuntimeError(f"{cmd[0]} exited {p.returncode}: {out[-500:]}")
    return out, ru.ru_utime + ru.ru_stime


def run_write_bw(*, veth: bool, nbytes: int, mtu: int, msg: int = 1 << 20,
                 gso: bool = False) -> dict:
    """The engine alone: traffic/native/bin/tn_write_bw, one unpaced QP (``gso``: with
    UDP segmentation offload on both ends, ``--gso``)."""
    ips = VETH_IPS if veth else LO_IPS
    nss = (NS_A, NS_B) if veth else (None, None)
    n = max(1, nbytes // msg)
    common = ["-s", str(msg), "-n", str(n), "-M", str(mtu), "-w", "1024",
              *(["--gso"] if gso else [])]
    res: dict = {}

    def server() -> None:
        res["srv"] = _run_rusage([*_prefix(nss[1]), str(WRITE_BW), "--server", "--local",
                                  ips[1], "--peer", ips[0], *common])

    import threading
    th = threading.Thread(target=server)
    th.start()
    time.sleep(0.3)
    out, cpu_c = _run_rusage([*_prefix(nss[0]), str(WRITE_BW), "--local", ips[0], "--peer",
                              ips[1], *common])
    th.join(timeout=60)
    srv_out, cpu_s = res["srv"]
    line = srv_out.strip().splitlines()[3].split()
    pkts = n * -(-msg // mtu)
    # the server lingers 0.5 s after the last message: idle, no CPU worth counting
    return {"engine": "native (tn_write_bw)", "goodput_bps": float(line[2]) * 1e9,
            "cpu_s": cpu_c + cpu_s, "data_pkts": pkts,
            "retx": int(out.strip().splitlines()[3].split()[4]), "gso": gso}


def run_blast(*, veth: bool, size: int, n: int) -> dict:
    """A batched blast of ``n`` datagrams of ``size`` bytes on the path: the UDP payload
    bit/s received and sent, and the CPU seconds of both processes per datagram
    delivered (``cpu_us_per_pkt``): the kernel's own cost of moving one datagram from
    one socket to another, with no transport at all, the floor under any endpoint that
    sends through UDP sockets on this host."""
    ips = VETH_IPS if veth else LO_IPS
    nss = (NS_A, NS_B) if veth else (None, None)
    rx = subprocess.Popen([*_prefix(nss[1]), str(BLAST), "--recv", "--local", ips[1],
                           "--port", "4792"], stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None
    rx.stdout.readline()
    out, cpu_tx = _run_rusage([*_prefix(nss[0]), str(BLAST), "--send", "--local", ips[0],
                               "--peer", ips[1], "--port", "4792", "-s", str(size),
                               "-n", str(n)])
    got = rx.stdout.read().split()
    _, status, ru = os.wait4(rx.pid, 0)
    rx.returncode = os.waitstatus_to_exitcode(status)
    if rx.returncode or len(got) < 4:
        raise RuntimeError(f"{BLAST.name} --recv exited {rx.returncode}: {' '.join(got)}")
    delivered = int(got[0])
    return {"received_bps": float(got[3]), "sent_bps": float(out.split()[3]),
            "delivered": delivered, "sent": int(out.split()[0]),
            "received_bytes": int(got[1]),
            "cpu_us_per_pkt": (cpu_tx + ru.ru_utime + ru.ru_stime) / max(1, delivered) * 1e6}


def run_floor(*, pps: int, size: int, n: int) -> dict:
    """The pacing floor (``tn_udp_blast --pps``): ``n`` datagrams of ``size`` bytes at
    ``pps`` through the veth pair to port 4791, where the pacing capture sees them."""
    rx = subprocess.Popen([*_prefix(NS_B), str(BLAST), "--recv", "--local", VETH_IPS[1],
                           "--port", "4791"], stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None
    try:
        rx.stdout.readline()
        _sh(*_prefix(NS_A), str(BLAST), "--send", "--local", VETH_IPS[0], "--peer",
            VETH_IPS[1], "--port", "4791", "-s", str(size), "-n", str(n), "--pps", str(pps))
        rx.communicate(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    return {"engine": "floor"}


# -- pacing capture ----------------------------------------------------------------------
def start_capture(ns: str, iface: str, direction: str, src: str, out: str) -> subprocess.Popen:
    """tcpdump (PACKET_MMAP ring, kernel nanosecond timestamps) of the RoCEv2 packets
    from ``src`` leaving (``out``) or entering (``in``) ``iface``: light enough to keep up
    at 100k pkt/s, where a Python capture loop competes with the sender for the CPU."""
    p = subprocess.Popen([*_prefix(ns), "tcpdump", "-i", iface, "-Q", direction, "-nn", "-s",
                          "64", "-B", "65536", "--time-stamp-precision=nano", "-w", out,
                          f"udp dst port 4791 and src host {src}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    p.stderr.readline()  # "listening on ...": the capture runs
    return p


def stop_capture(p: subprocess.Popen) -> None:
    p.send_signal(2)
    p.wait(timeout=30)


def read_pcap(path: str) -> np.ndarray:
    """(timestamp ns, frame length, opcode, PSN, source IPv4 as an integer, AETH
    syndrome or -1) of every RoCEv2 packet of a nanosecond pcap."""
    data = Path(path).read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    if magic != 0xA1B23C4D:
        raise RuntimeError(f"{path}: not a nanosecond pcap (magic {magic:#x})")
    rows, off = [], 24
    while off + 16 <= len(data):
        sec, ns, incl, orig = struct.unpack_from("<IIII", data, off)
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if len(frame) >= 54:  # Ethernet, IPv4, UDP, BTH
            syn = frame[54] if frame[42] == 0x11 and len(frame) > 54 else -1
            rows.append((sec * 10**9 + ns, orig, frame[42], int.from_bytes(frame[51:54], "big"),
                         int.from_bytes(frame[26:30], "big"), syn))
    return np.array(rows, dtype=np.int64).reshape(-1, 6)


def gap_stats(rows: np.ndarray, rate: float, wire: int) -> dict:
    """Inter-departure gaps before MIDDLE packets (the first and last differ in size)
    against size / rate: median, p99 of |error|, share of bursts (< 1/4 of the ideal)."""
    rows = rows[np.isin(rows[:, 2], list(DATA_OPS))]
    if len(rows) < 100:
        raise RuntimeError(f"captured {len(rows)} data packets")
    t, size = rows[:, 0].astype(np.float64) * 1e-9, rows[:, 1]
    gaps = np.diff(t)[10:]
    ideal = size[1:][10:] * 8 / rate
    mid = size[1:][10:] == wire
    gaps, ideal = gaps[mid], ideal[mid]
    err = np.abs(gaps - ideal)
    return {"packets": len(rows), "median_gap_us": float(np.median(gaps) * 1e6),
            "ideal_us": float(ideal[0] * 1e6),
            "median_error_pct": float((np.median(gaps) / ideal[0] - 1) * 100),
            "p99_error_us": float(np.percentile(err, 99) * 1e6),
            "p999_error_us": float(np.percentile(err, 99.9) * 1e6),
            "bursts_pct": float(np.mean(gaps < ideal / 4) * 100)}


#: the native engine's pacing modes (traffic/native/tn_engine.c's lead): "" its default
#: (real-time priority, the p99 lead within the spin budget), "median" (the median lead
#: only, the default before the budget), "normal" (normal priority), "RT+spin" (the p99
#: lead with no budget), "RT+spin+lead100" (that with the lead capped at 100 us, not 60)
PACING_ENV = {"": {}, "median": {"TN_ENGINE_SPIN": "0"}, "normal": {"TN_ENGINE_RT": "0"},
              "RT+spin": {"TN_ENGINE_RT": "1", "TN_ENGINE_SPIN": "1"},
              "RT+spin+lead100": {"TN_ENGINE_RT": "1", "TN_ENGINE_SPIN": "1",
                                  "TN_ENGINE_LEAD_MAX_US": "100"}}
PACING_ROWS = ("floor", "native", "native:median", "native:normal", "native:RT+spin",
               "python")

_IDLE = """
import json, sys, time
from traffic.endpoint import EndpointConfig
from traffic.native_endpoint import NativeEndpoint
from traffic.qp_types import QpConfig
ep = NativeEndpoint(EndpointConfig(ip=sys.argv[1], port=int(sys.argv[2])))
ep.add_requester(QpConfig(qpn=1, peer_qpn=2, peer_ip=sys.argv[1], rate_bps=86.56e6))
time.sleep(0.2)
t0 = time.monotonic()
ep._refresh(); c0 = ep.engine_info()["cpu_s"]
time.sleep(float(sys.argv[3]))
ep._refresh(); c1 = ep.engine_info()["cpu_s"]
print(json.dumps({"cpu_s": c1 - c0, "seconds": time.monotonic() - t0}))
ep.close()
"""


def idle_cpu(mode: str = "", seconds: float = 2.0, root: Path = ROOT) -> float:
    """The native engine thread's CPU (% of a core) while its one requester QP (paced
    at 10k pkt/s of 1 KiB) has nothing to send: the timer design's idle cost."""
    env = {**os.environ, "PYTHONPATH": str(root), **PACING_ENV[mode]}
    out = subprocess.run([sys.executable, "-c", _IDLE, LO_IPS[0], "4793", str(seconds)],
                         capture_output=True, text=True, env=env, cwd=root, check=True,
                         timeout=60).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["cpu_s"] / r["seconds"] * 100


def pacing(engine: str, pps: int, *, mtu: int = 1024, seconds: float = 1.0,
           mode: str = "", rx_capture: bool = False, keep: str | None = None,
           base: Path | None = None) -> dict:
    """One QP paced at ``pps`` through the veth pair, captured leaving the sender's
    interface (the departures) and, with ``rx_capture``, entering the receiver's (after
    the veth hop; a second tap costs the sender's send path too: veth runs the receive
    side inside the sender's syscall).  ``mode`` (native engine): a key of
    PACING_ENV.  ``engine_cpu_pct`` / ``spin_pct``: the sender engine thread's CPU and
    spin seconds over its whole run (~1.5 s idle before the start, ~0 while idle) per
    second of pacing, in % of a core; ``rx_poll_pct`` / ``rx_cpu_pct``: the receiver
    engine's receive poll and CPU.  ``base``: run that checkout's code instead (a
    baseline measured in the same run)."""
    wire = mtu + 12 + 4 + WIRE_OVERHEAD  # a MIDDLE packet's frame
    rate = pps * wire * 8
    npk = int(pps * seconds)
    tmp = Path(tempfile.mkdtemp(prefix="bench-pacing-"))
    caps = {"tx": start_capture(NS_A, VETH_A, "out", VETH_IPS[0], str(tmp / "tx.pcap"))}
    if rx_capture:
        caps["rx"] = start_capture(NS_B, VETH_B, "in", VETH_IPS[0], str(tmp / "rx.pcap"))
    try:
        if engine == "floor":
            res = run_floor(pps=pps, size=mtu + 16, n=npk)
        else:
            res = run_p2p(engine, veth=True, nbytes=npk * mtu, mtu=mtu, rate=str(rate),
                          msg=npk * mtu, env=PACING_ENV[mode], root=base or ROOT)
    finally:
        for c in caps.values():
            stop_capture(c)
    tx = gap_stats(read_pcap(str(tmp / "tx.pcap")), rate, wire)
    rx = gap_stats(read_pcap(str(tmp / "rx.pcap")), rate, wire) if rx_capture else None
    for f in tmp.iterdir():
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            name = f"{engine}{mode and '-' + mode}{'-base' if base else ''}-{pps}-{f.name}"
            shutil.move(str(f), Path(keep) / name)
        else:
            f.unlink()
    tmp.rmdir()
    eng = res.get("counters") or {}
    rxe = res.get("rx_counters") or {}
    late = int(eng.get("late_departures", 0))
    label = res["engine"] + (f" ({mode})" if mode else "") + ("@base" if base else "")
    return {"engine": label, "pps": pps, "load": os.getloadavg()[0], **tx,
            "rx": rx, "late_departures": late,
            "late_mean_us": float(eng.get("late_s", 0.0)) / late * 1e6 if late else 0.0,
            "engine_cpu_pct": float(eng.get("cpu_s", float("nan"))) / seconds * 100,
            "spin_pct": float(eng.get("spin_s", float("nan"))) / seconds * 100,
            "budget_out_pct": float(eng.get("budget_out_s", float("nan"))) / seconds * 100,
            "lead_us": float(eng.get("spin_lead_s", float("nan"))) * 1e6,
            "timer_late_p99_us": float(eng.get("timer_late_p99_s", float("nan"))) * 1e6,
            "rx_cpu_pct": float(rxe.get("cpu_s", float("nan"))) / seconds * 100,
            "rx_poll_pct": float(rxe.get("rx_poll_s", float("nan"))) / seconds * 100,
            "tx_timestamps": int(eng.get("tx_timestamps", 0)),
            "wire_delay_us": float(eng.get("wire_delay_s", 0.0)) * 1e6}


def rtt(engine: str, *, rate_mbps: float = 40.0, seconds: float = 1.0) -> dict:
    """RTT samples against the wire: one QP at half of a 40 Mbit/s HTB-shaped veth port
    (the eBPF switches' shaping, common/kernel/shaping.py), captured leaving and entering
    the sender's interface.  Wire RTT per ACK: its arrival minus the first departure of
    the PSN it acknowledges.  The QP's smallest sample must not be below the wire's
    smallest (the endpoint's clock reads before it sends and after it receives)."""
    from common.kernel.shaping import shaping_commands
    for cmd in shaping_commands(VETH_A, rate_mbps, 64):
        _sh(*_prefix(NS_A), *cmd.split())
    tmp = Path(tempfile.mkdtemp(prefix="bench-rtt-"))
    pcap = str(tmp / "a.pcap")
    cap = subprocess.Popen([*_prefix(NS_A), "tcpdump", "-i", VETH_A, "-nn", "-s", "64", "-B",
                            "16384", "--time-stamp-precision=nano", "-w", pcap, "udp port 4791"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert cap.stderr is not None
    cap.stderr.readline()
    msg = 64 << 10
    nbytes = int(rate_mbps / 2 * 1e6 / 8 * seconds)
    try:
        res = run_p2p(engine, veth=True, nbytes=nbytes, mtu=1024, rate=f"{rate_mbps / 2:g}M",
                      msg=msg, extra=["--cc", "hpcc-sender"])
    finally:
        stop_capture(cap)
        _sh(*_prefix(NS_A), "tc", "qdisc", "del", "dev", VETH_A, "root", check=False)
    rows = read_pcap(pcap)
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    a = struct.unpack("!I", bytes(map(int, VETH_IPS[0].split("."))))[0]
    first: dict[int, int] = {}
    wire = []
    for ts, _n, op, psn, src, syn in rows.tolist():
        if src == a and op in DATA_OPS:
            first.setdefault(psn, ts)
        elif src != a and op == 0x11 and syn >= 0 and syn & 0x60 == 0 and psn in first:
            wire.append((ts - first[psn]) * 1e-3)
    w = np.array(wire)
    snap = res["requester"]
    return {"engine": res["engine"], "acks": len(w), "wire_min_us": float(w.min()),
            "wire_p10_us": float(np.percentile(w, 10)),
            "wire_median_us": float(np.median(w)),
            "min_sample_us": snap["hpcc"]["min_rtt_s"] * 1e6,
            "srtt_us": snap["srtt_s"] * 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bytes", type=int, default=48 << 20, help="bytes per transfer")
    ap.add_argument("--no-veth", action="store_true", help="loopback only")
    ap.add_argument("--skip", default="",
                    help="comma list of cpu,goodput,gso,pacing,rtt to skip (gso: the rows "
                         "with UDP segmentation offload)")
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    ap.add_argument("--pacing-rx", action="store_true",
                    help="pacing: also capture entering the receiver's interface")
    ap.add_argument("--pacing-rows", default=",".join(PACING_ROWS),
                    help="pacing: comma list of engine[:mode][@base] rows (engines: floor "
                         "(this host's pacing floor), native, python; modes: "
                         f"{', '.join(m for m in PACING_ENV if m)}; @base: the code of "
                         f"--pacing-base; default {','.join(PACING_ROWS)})")
    ap.add_argument("--pacing-pps", default="10000,100000", help="pacing: comma list of pkt/s")
    ap.add_argument("--pacing-repeat", type=int, default=1, metavar="N",
                    help="pacing: measure every row N times (interleaved)")
    ap.add_argument("--pacing-keep", metavar="DIR", help="pacing: keep the captures here")
    ap.add_argument("--pacing-base", metavar="DIR", type=Path,
                    help="pacing: a checkout (its native engine built) whose code the "
                         "@base rows run: before/after in one run")
    a = ap.parse_args()
    if not BLAST.exists():
        print("build the native engine first: make -C traffic/native", file=sys.stderr)
        return 1
    if not a.no_veth and os.geteuid() != 0:
        print("not root: no veth pair, loopback rows only (pacing needs the veth)",
              file=sys.stderr)
        a.no_veth = True
    skip = set(a.skip.split(","))
    results: dict = {"goodput": [], "pacing": []}
    paths = [False] + ([] if a.no_veth else [True])
    if not a.no_veth:
        veth_up()
    try:
        if "goodput" not in skip or "cpu" not in skip:
            print("goodput of one unpaced QP (Mb/s; ratios in the same run) and CPU per "
                  "data packet (us, sender + receiver)")
            print("path      MTU  engine  runner  python   blast blast-tx  eng/py  eng/blast  "
                  "eng/tx  run/py   CPU eng  run   py  blast  eng/py run/py blast/py"
                  + ("" if "gso" in skip else "   | GSO: engine  runner  eng/blast   CPU eng"
                     "   run  eng/py run/py"))
            for veth in paths:
                for mtu in (1024, 4096):
                    nb = a.bytes * (mtu // 1024)
                    eng = run_write_bw(veth=veth, nbytes=nb, mtu=mtu)
                    nat = run_p2p("native", veth=veth, nbytes=nb, mtu=mtu, rate="400G")
                    py = run_p2p("python", veth=veth, nbytes=max(1 << 20, nb // 8), mtu=mtu,
                                 rate="400G")
                    bl = run_blast(veth=veth, size=mtu + 16, n=max(200_000, eng["data_pkts"]))
                    blast, blast_tx = bl["received_bps"], bl["sent_bps"]
                    frames = eng["goodput_bps"] * (mtu + 16) / mtu  # as UDP payload bit/s
                    cpu = {k: r["cpu_s"] / r["data_pkts"] * 1e6
                           for k, r in (("engine", eng), ("runner", nat), ("python", py))}
                    cpu["blast"] = bl["cpu_us_per_pkt"]
                    gso = {}
                    if "gso" not in skip:  # the same transfers, segmentation offload on
                        gso["engine"] = run_write_bw(veth=veth, nbytes=nb, mtu=mtu, gso=True)
                        gso["runner"] = run_p2p("native", veth=veth, nbytes=nb, mtu=mtu,
                                                rate="400G", env={"TN_ENGINE_GSO": "1"})
                        for k, r in gso.items():
                            cpu[f"{k}_gso"] = r["cpu_s"] / r["data_pkts"] * 1e6
                    row = {"path": "veth" if veth else "loopback", "mtu": mtu, "engine": eng,
                           "runner": nat, "python": py, "blast_bps": blast,
                           "blast_sent_bps": blast_tx,
                           "engine_vs_python": eng["goodput_bps"] / py["goodput_bps"],
                           "engine_vs_blast": frames / blast,
                           "engine_vs_blast_sent": frames / blast_tx,
                           "runner_vs_python": nat["goodput_bps"] / py["goodput_bps"],
                           "cpu_us_per_pkt": cpu, "gso": gso}
                    results["goodput"].append(row)
                    print(f"{row['path']:9s} {mtu:4d} {eng['goodput_bps'] / 1e6:7.0f} "
                          f"{nat['goodput_bps'] / 1e6:7.0f} {py['goodput_bps'] / 1e6:7.0f} "
                          f"{blast / 1e6:7.0f} {blast_tx / 1e6:8.0f} "
                          f"{row['engine_vs_python']:7.2f} {row['engine_vs_blast']:9.2f} "
                          f"{row['engine_vs_blast_sent']:7.2f} {row['runner_vs_python']:7.2f}  "
                          f"{cpu['engine']:7.2f} {cpu['runner']:5.2f} {cpu['python']:5.1f} "
                          f"{cpu['blast']:5.2f} {cpu['engine'] / cpu['python']:6.3f} "
                          f"{cpu['runner'] / cpu['python']:6.3f} "
                          f"{cpu['blast'] / cpu['python']:8.3f}"
                          + ("" if not gso else
                             f"   | {gso['engine']['goodput_bps'] / 1e6:11.0f} "
                             f"{gso['runner']['goodput_bps'] / 1e6:7.0f} "
                             f"{gso['engine']['goodput_bps'] * (mtu + 16) / mtu / blast:10.2f} "
                             f"{cpu['engine_gso']:9.2f} {cpu['runner_gso']:5.2f} "
                             f"{cpu['engine_gso'] / cpu['python']:7.3f} "
                             f"{cpu['runner_gso'] / cpu['python']:6.3f}"), flush=True)
        if "pacing" not in skip and not a.no_veth:
            print("\npacing (veth; gaps before MIDDLE packets from tcpdump's kernel timestamps "
                  "leaving the sender's interface; rx: entering the receiver's, --pacing-rx)")
            rows = []
            for r in (r for r in a.pacing_rows.split(",") if r):
                spec, _, at = r.partition("@")
                engine, mode = (spec.split(":") + [""])[:2]
                if engine not in ("native", "python", "floor") or mode not in PACING_ENV or \
                        at not in ("", "base") or (at and not a.pacing_base) or \
                        (engine == "floor" and (mode or at)):
                    ap.error(f"--pacing-rows: {r} unknown (@base needs --pacing-base)")
                rows.append((engine, mode, a.pacing_base if at else None))
            for engine, mode, base in rows:
                if engine == "native":
                    pct = idle_cpu(mode, root=base or ROOT)
                    results.setdefault("idle", []).append({"mode": mode, "engine_cpu_pct": pct,
                                                           "base": bool(base)})
                    print(f"idle: native{f' ({mode})' if mode else ''}{'@base' if base else ''}"
                          f": engine thread CPU {pct:.3f} % of a core (one QP, nothing posted)",
                          flush=True)
            print("engine             pkt/s  ideal us  median us  median err %  p99 |err| us  "
                  "p99.9 us  bursts %  rx: med err %  p99 us  late>20us (mean us)  "
                  "eng CPU %  spin %  lead us  timer p99 us  budget out %  rx CPU %  rx poll %  "
                  "load  wire ts (delay us)")
            for pps in [int(x) for x in a.pacing_pps.split(",")] * a.pacing_repeat:
                for engine, mode, base in rows:
                    r = pacing(engine, pps, mode=mode, rx_capture=a.pacing_rx,
                               keep=a.pacing_keep, base=base)
                    results["pacing"].append(r)
                    x = r["rx"] or {"median_error_pct": float("nan"), "p99_error_us": float("nan")}
                    late = f"({r['late_mean_us']:.0f})"
                    print(f"{r['engine']:17s} {pps:6d} {r['ideal_us']:9.2f} "
                          f"{r['median_gap_us']:10.2f} {r['median_error_pct']:12.2f} "
                          f"{r['p99_error_us']:13.1f} {r['p999_error_us']:9.1f} "
                          f"{r['bursts_pct']:9.1f} {x['median_error_pct']:14.2f} "
                          f"{x['p99_error_us']:7.1f} {r['late_departures']:9d} "
                          f"{late:>9s} {r['engine_cpu_pct']:10.1f} "
                          f"{r['spin_pct']:7.1f} {r['lead_us']:8.1f} "
                          f"{r['timer_late_p99_us']:13.1f} {r['budget_out_pct']:13.1f} "
                          f"{r['rx_cpu_pct']:9.1f} {r['rx_poll_pct']:10.1f} {r['load']:5.1f} "
                          f"{r['tx_timestamps']:8d} ({r['wire_delay_us']:.0f})",
                          flush=True)
        if "rtt" not in skip and not a.no_veth:
            print("\nRTT samples against the wire (veth, the sender's port shaped by HTB at "
                  "40 Mbit/s as the eBPF switches shape theirs; one QP at 20 Mbit/s)")
            print("engine   ACKs  wire min us  wire p10  wire median  QP min sample us  srtt us")
            for engine in ("native", "python"):
                r = rtt(engine)
                results.setdefault("rtt", []).append(r)
                print(f"{r['engine']:7s} {r['acks']:5d} {r['wire_min_us']:12.1f} "
                      f"{r['wire_p10_us']:9.1f} {r['wire_median_us']:12.1f} "
                      f"{r['min_sample_us']:17.1f} {r['srtt_us']:8.1f}", flush=True)
    finally:
        if not a.no_veth:
            veth_down()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
