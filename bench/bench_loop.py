"""The controller-driven HPCC loop end to end, with the host agent's old and new shipping.

A real host agent (``python -m ebpf.agent``, its sink in the kernel) runs in one
namespace of a veth pair; the controller's parts (collector, HPCC loop, feedback
sender, keyed as the test bed runs them) run here with their sockets in the other
namespace, and a stand-in sender endpoint (a ``traffic.control`` socket that applies
and confirms every rate at once) listens beside the agent.  INT frames of several
QPs are sent into the agent's interface at a steady rate, first with empty queues
at every hop, then with a queue at one hop.  Each feedback record comes back
confirmed, giving the loop from the host sink's capture of the telemetry to the
rate applied (``controller.cc.latency``: ``host_to_applied``).

Variants, interleaved in one run so machine load moves them together:

* ``old``   ``--ship-records 1``: every read of the ring shipped at once (the agent
  before ``ebpf.shipper.ShipPolicy``);
* ``new``   the agent's defaults: ship on N records or after a short timer, at once
  with everything held when a record saw a queue;
* ``q1ms``  the same, a record that saw a queue held up to 1 ms;
* ``timer`` the same batching without the early flush for queues (what it buys).

Printed per variant: lag p50/p99 for telemetry of empty queues and of a queue,
records per datagram, the agent's CPU per 1000 records, each as a ratio to ``old``.

First (no root needed) the controller's cost per datagram: the same host records sent
to the collector's socket one per datagram and 32 per datagram (the baseline), while
the collector is held so they wait in its socket as under load; it drains them in
receive rounds (batched receive, decode, tables, the HPCC loop) and the CPU of each
stage is printed per datagram; then the same fed one datagram per round, what an
idle collector pays for a datagram whatever it carries.

The loop needs root (namespaces, BPF) and bcc.  Examples::

  python -m bench.bench_loop                      # 2 rounds, 1000 records/s, 3 s phases
  python -m bench.bench_loop --rate 4000 --rounds 3
  python -m bench.bench_loop --cost-only          # the controller's cost per datagram
"""
from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FB_PORT = 32768
VARIANTS: dict[str, list[str]] = {
    "old": ["--ship-records", "1"],
    "new": [],
    "q1ms": ["--ship-queued-interval", "1"],
    "timer": ["--ship-queued-interval", "5"],
}


@dataclass(slots=True)
class PhaseResult:
    lag_ms: np.ndarray
    arrival_lag_ms: np.ndarray
    """From the batch's arrival at the controller (without the agent's part)."""
    records: int
    datagrams: int
    agent_cpu_s: float
    collector_cpu_s: float
    """CPU time of the collector thread (decode, tables, HPCC, feedback)."""


def _frames(src: dict[str, str], dst: dict[str, str], n: int, qps: int, first_psn: int,
            queue_bytes: int) -> list[bytes]:
    """INT RoCEv2 frames src -> dst, round robin over ``qps`` QPs, two hops each."""
    from formats import int_md, roce
    from formats.int_md import HopRecord

    out = []
    for i in range(n):
        psn = first_psn + i
        f = roce.build_frame(eth_src=src["mac"], eth_dst=dst["mac"], src=src["ip"],
                             dst=dst["ip"],
                             sport=49152 + i % qps, opcode=roce.Opcode.WRITE_ONLY,
                             dest_qp=0x100 + i % qps, psn=psn, payload=b"w" * 64,
                             reth=(0x1000, 5, 64))
        hops = [HopRecord(node_id=node, queue_occupancy=(queue_bytes // 1000 if node == 1 else 0),
                          egress_ts=1000 + 100 * psn + node, tx_bytes=(1100 * psn) & 0xFFFFFFFF,
                          queue_bytes=queue_bytes if node == 1 else 0, line_rate=100)
                for node in (2, 1)]   # newest hop first
        out.append(int_md.insert_int(f, hops))
    return out


class Endpoint:
    """The sender's control socket: applies (confirms) every rate at once."""

    def __init__(self, path: str) -> None:
        from traffic.control import ControlServer
        self.server = ControlServer(path)
        self.applied = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="endpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not select.select([self.server.sock], [], [], 0.1)[0]:
                continue
            for cmds, _errs, addr in self.server.receive():
                confirm = [{"seq": c.seq, "qp": c.qp, "status": "applied", "psn": 0}
                           for c in cmds if c.seq is not None]
                self.applied += len(confirm)
                if confirm:
                    self.server.reply(addr, {"confirm": confirm})

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.server.close()


def send_frames(spec: dict) -> None:
    """Sender process (``--send JSON``): frames out of ``spec["ifname"]`` at a steady
    rate, a burst per millisecond (apart from the controller's process and its GIL)."""
    frames = _frames(spec["src"], spec["dst"], spec["n"], spec["qps"], spec["psn"],
                     spec["queue"])
    rate = spec["rate"]
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as tx:
        tx.bind((spec["ifname"], 0))
        burst = max(1, rate // 1000)
        t0 = time.monotonic()
        for k in range(0, len(frames), burst):
            for f in frames[k:k + burst]:
                tx.send(f)
            delay = t0 + (k + burst) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def _cpu_s(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a process (or one of its threads)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _agent(h2, ctl_addr: tuple[str, int], control: str, key_file: Path,
           extra: list[str]) -> Iterator[subprocess.Popen]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = h2.popen([sys.executable, "-m", "ebpf.agent", "--iface", h2.ifname,
                  "--controller", f"{ctl_addr[0]}:{ctl_addr[1]}", "--agent-id", h2.ip,
                  "--feedback-port", str(FB_PORT), "--control", control,
                  "--key-file", str(key_file), *extra, "0.5"],
                 cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        if not select.select([p.stdout], [], [], 120)[0] or "rec" not in p.stdout.readline():
            raise RuntimeError(f"agent did not start: {p.stderr.read() if p.poll() is not None else ''}")
        yield p
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_variant(h1, h2, key_file: Path, extra: list[str], *,
                rate: int, phase_s: float, qps: int) -> dict[str, PhaseResult]:
    """One agent with ``extra`` flags: a quiet phase and a queued phase."""
    from common.auth import KeyFile, Signer, Verifier
    from controller.cc import FeedbackSender, HpccEngine, HpccParams
    from controller.cc.loop import FeedbackTarget, HpccLoop
    from controller.int.collector import Collector, CollectorConfig
    from formats.auth import CONTROLLER_SENDER_ID, FrameKind

    keys = KeyFile(key_file)
    eng = HpccEngine(n_flows=64, params=HpccParams(base_rtt_s=1e-3))
    fb = FeedbackSender(n_flows=64, min_change_fraction=0.0,
                        signer=Signer(keys, sender_id=CONTROLLER_SENDER_ID,
                                      kind=FrameKind.FEEDBACK),
                        verifier=Verifier(keys, kinds=(FrameKind.CONFIRM,)))
    with h1.enter():
        fb.sock.bind((h1.ip, 0))
    loop = HpccLoop(engine=eng, sender=fb, resolve=lambda s: FeedbackTarget(
        agent=(h2.ip, FB_PORT), flow_id=int(s["dest_qp"]), max_rate_bps=100e6))
    col = Collector(CollectorConfig(host=h1.ip, report_port=0, agent_port=0, flow_capacity=64,
                                    keys=keys, kernel_filter=False), listeners=[loop])
    with h1.enter():
        col.start()
    col.add_reader(fb.sock, loop.poll_confirmations)
    control = tempfile.mktemp(prefix="bench-loop-", suffix=".sock")
    with h2.enter():   # the agent's reply address is abstract: per namespace
        ep = Endpoint(control)
    out: dict[str, PhaseResult] = {}
    try:
        assert col.agent_address is not None
        with _agent(h2, col.agent_address, control, key_file, extra) as agent:
            psn = 0
            for phase, queue in (("quiet", 0), ("queued", 30_000)):
                lat, lat2 = eng.latency.host_apply, eng.latency.telemetry_apply
                n0, m0 = lat._n, lat2._n
                rec0 = col.stats().host_records
                dg0 = col.stats().agent_datagrams
                cpu0 = _cpu_s(agent.pid)
                assert col._thread is not None and col._thread.native_id is not None
                tid = col._thread.native_id
                ccpu0 = _cpu_s(os.getpid(), tid)
                n = int(rate * phase_s)
                spec = {"src": {"mac": h1.mac, "ip": h1.ip}, "dst": {"mac": h2.mac, "ip": h2.ip},
                        "ifname": h1.ifname, "n": n, "qps": qps, "psn": psn, "queue": queue,
                        "rate": rate}
                psn += n
                h1.run([sys.executable, "-m", "bench.bench_loop", "--send", json.dumps(spec)],
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       timeout=60 + 3 * phase_s)
                time.sleep(0.3)   # the last confirmations come back
                st = col.stats()
                if os.environ.get("BENCH_LOOP_DEBUG"):
                    print(phase, loop.stats, fb.stats, ep.applied, eng.latency.summary(),
                          agent.stderr.read(0) if agent.stderr else "", file=sys.stderr)
                out[phase] = PhaseResult(lag_ms=lat.values_ns()[n0:lat._n] / 1e6,
                                         arrival_lag_ms=lat2.values_ns()[m0:lat2._n] / 1e6,
                                         records=st.host_records - rec0,
                                         datagrams=st.agent_datagrams - dg0,
                                         agent_cpu_s=_cpu_s(agent.pid) - cpu0,
                                         collector_cpu_s=_cpu_s(os.getpid(), tid) - ccpu0)
    finally:
        ep.close()
        col.stop()
        fb.close()
    return out


def print_summary(results: dict[str, list[dict[str, PhaseResult]]]) -> None:
    """Per phase and variant, the figures and their ratio to ``old``'s."""
    summary: dict[str, dict[str, float]] = {}
    for name, runs in results.items():
        row: dict[str, float] = {}
        for phase in ("quiet", "queued"):
            rs = [r[phase] for r in runs]
            lag = np.concatenate([r.lag_ms for r in rs])
            recs = max(1, sum(r.records for r in rs))
            row[f"{phase}_p50"] = _pct(lag, 50)
            row[f"{phase}_p99"] = _pct(lag, 99)
            row[f"{phase}_ctl50"] = _pct(np.concatenate([r.arrival_lag_ms for r in rs]), 50)
            row[f"{phase}_n"] = float(lag.size)
            row[f"{phase}_per_dgram"] = recs / max(1, sum(r.datagrams for r in rs))
            row[f"{phase}_ccpu"] = 1e6 * sum(r.collector_cpu_s for r in rs) / recs
            row[f"{phase}_acpu"] = 1e6 * sum(r.agent_cpu_s for r in rs) / recs
        summary[name] = row
    base = summary["old"]
    cols = {"quiet": (("per_dgram", "rec/dgram", "8.1f"), ("ccpu", "ctl cpu/1k", "8.1f"),
                      ("acpu", "agent cpu/1k", "8.1f")),
            "queued": (("p50", "p50", "7.2f"), ("p99", "p99", "7.2f"),
                       ("ctl50", "ctl p50", "7.2f"), ("per_dgram", "rec/dgram", "8.1f"),
                       ("ccpu", "ctl cpu/1k", "8.1f"), ("acpu", "agent cpu/1k", "8.1f"))}
    print("loop: host capture -> rate applied at the sender, ms (ctl: from the controller's "
          "receipt); CPU: ms per 1000 records (ctl: collector thread); (x old)")
    for phase, keys in cols.items():
        what = ("queue 0 at every hop: no feedback, cost only" if phase == "quiet"
                else "a queue at one hop: every decision sent and confirmed")
        print(f"-- {phase} ({what})")
        print(f"{'variant':<7} " + " ".join(f"{title:>15}" for _, title, _ in keys)
              + (f" {'samples':>7}" if phase == "queued" else ""))
        for name, row in summary.items():
            cells = [_cell(row[f"{phase}_{k}"], base[f"{phase}_{k}"], fmt) for k, _, fmt in keys]
            print(f"{name:<7} {' '.join(cells)}"
                  + (f" {int(row[f'{phase}_n']):>7}" if phase == "queued" else ""))


def _cell(v: float, base: float, fmt: str) -> str:
    """A figure and its ratio to the baseline's."""
    return f"{v:{fmt}} ({v / base:5.2f})" if base else f"{v:{fmt}}    -  "


def _pct(v: np.ndarray, q: float) -> float:
    return float(np.percentile(v, q)) if v.size else float("nan")


def host_records(n: int, first: int, qps: int) -> np.ndarray:
    """``n`` host records of ``qps`` flows over two hops, a queue at the first."""
    from formats.int_md import HOST_RECORD_DTYPE, INT_DS_ID_HPCC, ROCEV2_UDP_PORT

    i = np.arange(first, first + n)
    r = np.zeros(n, HOST_RECORD_DTYPE)
    r["capture_ns"] = time.monotonic_ns()
    r["src_ip"], r["dst_ip"], r["orig_dport"] = 0x0A000001, 0x0A000002, ROCEV2_UDP_PORT
    r["dest_qp"], r["src_port"], r["psn"] = 0x100 + i % qps, 49152 + i % qps, i
    r["hop_count"], r["instruction_bitmap"] = 2, 0x8000 | 0x1000 | 0x0400
    r["ds_id"], r["ds_instruction"] = INT_DS_ID_HPCC, 0xE000
    hops = r["hops"]
    for h, node in enumerate((2, 1)):
        hops["node_id"][:, h] = node
        hops["egress_ts"][:, h] = 1000 + 100 * i + node
        hops["tx_bytes"][:, h] = (1100 * i) & 0xFFFFFFFF
        hops["queue_bytes"][:, h] = 30_000 if node == 1 else 0
        hops["line_rate"][:, h] = 100
    return r


def _loaded_rounds(col, sock: socket.socket, dgs: list[bytes]) -> tuple[float, dict[str, float], int]:
    """Send ``dgs`` to the collector's agent port while it is held (as when it is busy:
    the datagrams wait in its socket), let it drain them; returns (CPU us per datagram,
    us per datagram by stage, receive rounds)."""
    st0 = col.stats()
    with col._lock:       # the collector thread waits here after at most one round
        for d in dgs:
            sock.sendto(d, col.agent_address)
    deadline = time.monotonic() + 60
    while col.stats().agent_datagrams + col.stats().socket_drops - st0.agent_datagrams \
            - st0.socket_drops < len(dgs) and time.monotonic() < deadline:
        time.sleep(0.01)
    st = col.stats()
    if st.socket_drops != st0.socket_drops:
        print(f"  ({st.socket_drops - st0.socket_drops} datagrams dropped by the kernel: "
              "raise net.core.rmem_max or run as root)")
    stages = {k: (st.stage_ns[k] - st0.stage_ns[k]) / 1e3 / len(dgs) for k in st.stage_ns}
    return sum(stages.values()), stages, st.rounds - st0.rounds


def controller_cost(records: int = 16384, qps: int = 8) -> None:
    """Collector + HPCC loop CPU per datagram, 1 vs 32 records per datagram (same run),
    from the socket: batched receive, decode, tables and the HPCC loop per round."""
    from controller.cc import FeedbackSender, HpccEngine, HpccParams
    from controller.cc.loop import FeedbackTarget, HpccLoop
    from controller.int.collector import Collector, CollectorConfig
    from formats.agent_batch import encode_batch

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        sink.bind(("127.0.0.1", 0))
        eng = HpccEngine(n_flows=64, params=HpccParams(base_rtt_s=1e-3))
        fb = FeedbackSender(n_flows=64, min_change_fraction=0.0)
        fb.sock.bind(("127.0.0.1", 0))
        loop = HpccLoop(engine=eng, sender=fb, resolve=lambda s: FeedbackTarget(
            agent=sink.getsockname(), flow_id=int(s["dest_qp"]), max_rate_bps=100e6))
        col = Collector(CollectorConfig(report_port=0, agent_port=0, flow_capacity=64,
                                        rcvbuf_bytes=64 << 20), listeners=[loop])
        psn, seq = 0, 0
        cost: dict[int, float] = {}
        stages: dict[int, dict[str, float]] = {}
        rounds: dict[int, int] = {}
        single: dict[int, float] = {}
        with col:
            for per in (32, 1, 32, 1):    # interleaved; the first pass also warms up
                dgs = []
                for _ in range(0, records, per):
                    dgs.append(encode_batch(host_records(per, psn, qps), agent_id=1,
                                            batch_seq=seq))
                    psn, seq = psn + per, seq + 1
                cost[per], stages[per], rounds[per] = _loaded_rounds(col, tx, dgs)
                # the same, one datagram per call (what an idle collector pays per datagram)
                few = [encode_batch(host_records(per, psn + k * per, qps), agent_id=1,
                                    batch_seq=seq + k) for k in range(200)]
                psn, seq = psn + 200 * per, seq + 200
                t0 = time.thread_time()
                for d in few:
                    col.feed_agent_batches([d])
                single[per] = (time.thread_time() - t0) / len(few)
        fb.close()
    one, many = cost[1], cost[32]
    print(f"controller CPU per datagram (collector + HPCC loop): 1 record {one:.1f} us, "
          f"32 records {many:.1f} us (x {one / many:.2f}); per record "
          f"{one:.1f} us vs {many / 32:.2f} us (x {32 * one / many:.1f})")
    for per in (1, 32):
        print(f"  {per:>2} record(s)/datagram, {per * len(range(0, records, per)) // per} "
              f"datagrams in {rounds[per]} receive rounds, us per datagram: "
              + ", ".join(f"{k} {v:.2f}" for k, v in stages[per].items()))
    print(f"  one datagram per round (an idle collector): 1 record {1e6 * single[1]:.0f} us, "
          f"32 records {1e6 * single[32]:.0f} us")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_loop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=int, default=1000, help="INT records per second (1000)")
    p.add_argument("--phase", type=float, default=3.0, help="seconds per phase (3)")
    p.add_argument("--qps", type=int, default=8, help="QPs (flows) the frames spread over (8)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every variant (2)")
    p.add_argument("--cost-only", action="store_true",
                   help="only the controller's cost per datagram (no root needed)")
    p.add_argument("--send", help=argparse.SUPPRESS)   # the frame sender's process
    args = p.parse_args(argv)
    if args.send:
        send_frames(json.loads(args.send))
        return 0
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    controller_cost()
    if args.cost_only:
        return 0
    if os.geteuid() != 0:
        print("bench_loop: skipped (needs root for namespaces and BPF)")
        return 0
    from common.auth.keys import generate_key_file
    from common.kernel.netns import two_hosts
    from formats.auth import CONTROLLER_SENDER_ID

    print(f"loop: {args.rate} records/s over {args.qps} QPs, {args.phase:g} s per phase, "
          f"{args.rounds} rounds")
    results: dict[str, list[dict[str, PhaseResult]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp, \
            two_hosts("bl", subnet="10.77.91.0/24") as (h1, h2):
        key_file = Path(tmp) / "keys.yaml"
        generate_key_file(key_file, senders=[CONTROLLER_SENDER_ID,
                                             int(ipaddress.IPv4Address(h2.ip))])
        names = list(VARIANTS)
        for k in range(args.rounds):   # each round starts one variant later
            for name in names[k % len(names):] + names[:k % len(names)]:
                extra = VARIANTS[name]
                results[name].append(run_variant(h1, h2, key_file, extra, rate=args.rate,
                                                 phase_s=args.phase, qps=args.qps))
    print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
