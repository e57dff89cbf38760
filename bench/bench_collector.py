"""Collector decoding speed: hop records/s, vectorised vs per-record loops, same run.

Prints, for Telemetry Reports with N hops (HPCC profile, 28 B per hop):
  * the vectorised ReportDecoder (decode only, and decode + hop/flow tables);
  * a per-record ``struct`` loop baseline (precompiled Struct, one unpack per hop);
  * a scapy baseline (parse each report with the scapy layers + int_md hop decoding)
    on a smaller sample;
and host-agent batches through HostBatchDecoder.

    python -m bench.bench_collector [--reports 200000] [--hops 5] [--batch 2048] [--udp]

``--socket`` adds the socket path on one core: host-agent batches and Telemetry Reports
sent to a held collector (they wait in its socket, as under load), then drained in
receive rounds (recvmmsg, decode from the pool, tables); records per second of the
collector thread's CPU time and the share of each stage.

``--shards N`` adds N collector processes behind one port (SO_REUSEPORT, steered by
flow) against one process, both started once: ``--rounds`` backlogs of ``--backlog``
reports each way, alternating.  A backlog is sent while the processes are held
(SIGSTOP: the sender and its kernel work are done before the clock starts, each report
queued in the socket of the process the steering program picks), then they are all
released and timed until every report is in the tables, by their own stamps of their
last round (the bench polls their counters every 250 ms, not while they work).  Before
that, the collector's decode + tables in memory in N processes at once against one:
what the cores give the same work without sockets.

``--rx`` compares ways of emptying a socket: recv() per datagram, recvmsg_into and
recvmmsg (controller/int/rxbatch.c) into a slot pool, with 9216-byte rows and with
the report pool's 512-byte rows (longer datagrams spill).

``--soak S`` blasts reports from a sender process for S seconds (overload: the
kernel's drops are counted) and prints the collector's memory once a second.

``--udp`` adds an end-to-end figure: a sender process blasts the reports at a running
collector over loopback UDP; received, decoded and kernel-dropped datagrams are counted.

``--loop`` adds the control loop's own latency (telemetry arrival -> HPCC decision) on
host-agent batches of a few busy flows, as the demo produces them: the HPCC loop
handing the engine every sample (one round per sample of a flow) beside the loop
thinning each flow to ``HpccLoop.max_samples_per_flow`` samples per batch.
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from controller.cc import FeedbackSender, FeedbackTarget, HpccEngine, HpccLoop, HpccParams
from controller.int.collector import Collector, CollectorConfig
from controller.int.decode import ReportDecoder
from controller.int.host import HostBatchDecoder
from controller.int.shards import CollectorShards
from controller.int.steer import flow_index
from controller.int.synth import Hop, build_hpcc_report
from formats.agent_batch import encode_batch, max_records
from formats.int_md import (
    HOST_RECORD_DTYPE,
    HPCC_DS_INSTRUCTION,
    HPCC_INSTRUCTION_BITMAP,
    INT_DS_ID_HPCC,
    ROCEV2_UDP_PORT,
)


def make_reports(n_distinct: int, hops: int) -> list[bytes]:
    out = []
    for i in range(n_distinct):
        hs = [Hop(node_id=k + 1, queue_pkts=i % 50, egress_ts_us=1000 * i + k,
                  tx_bytes=(1500 * i) & 0xFFFFFFFF, queue_bytes=(i * 7) % 100000,
                  line_rate_mbps=100000) for k in range(hops)]
        out.append(build_hpcc_report(node_id=100, seq=i, hops=hs, dest_qp=i % 1000,
                                     sport=49152 + i % 64, psn=i))
    return out


_W = struct.Struct("!IIIII")
_HOP = struct.Struct("!IIQIII")  # node, queue, egress ts, tx bytes, queue bytes, line rate


def struct_loop(reports: list[bytes]) -> int:
    """Per-record baseline: what a straightforward Python collector does."""
    n = 0
    out = []
    for d in reports:
        _w0, node, ind, _m0, _m1 = _W.unpack_from(d, 0)
        md_len = (ind >> 8) & 0xFF
        ip = 20 + 4 * md_len
        ihl = d[ip] & 0xF
        shim = ip + 4 * ihl + 8
        shim_len = d[shim + 1]
        hop_ml = d[shim + 6] & 0x1F
        base = shim + 16
        for k in range((shim_len - 3) // hop_ml):
            nid, q, ts, tx, qb, lr = _HOP.unpack_from(d, base + 4 * hop_ml * k)
            out.append((node, nid, q >> 24, q & 0xFFFFFF, ts, tx, qb, lr))
            n += 1
    return n


def scapy_loop(reports: list[bytes]) -> int:
    from formats.int_md import IntMD
    from formats.telemetry_report import TelemetryReportGroup

    n = 0
    for d in reports:
        p = TelemetryReportGroup(d)
        n += len(p[IntMD].hops())
    return n


_SENDER = """
import socket, sys
data = sys.stdin.buffer.read()
port, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
msgs = [data[i:i + size] for i in range(0, len(data), size)]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", port))
for i in range(n):
    s.send(msgs[i % len(msgs)])
"""


def udp_end_to_end(distinct: list[bytes], n: int) -> tuple[float, int, int, float]:
    """(hop records/s decoded, reports decoded, kernel drops, send seconds) over loopback."""
    size = len(distinct[0])
    with Collector(CollectorConfig(report_port=0, agent_port=None)) as c:
        port = c.report_address[1]  # type: ignore[index]
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _SENDER, str(port), str(n), str(size)],
                       input=b"".join(distinct), check=True)
        sent_s = time.perf_counter() - t0
        last, still = -1, 0
        while still < 5:  # until nothing new arrives for 0.5 s
            time.sleep(0.1)
            s = c.stats()
            done = s.report_datagrams + s.socket_drops
            still = still + 1 if done == last else 0
            last = done
            if done >= n:
                break
        elapsed = time.perf_counter() - t0
        s = c.stats()
    return s.report_hop_records / elapsed, s.reports, s.socket_drops, sent_s


def demo_agent_batches(n_batches: int, datagrams: int, flows: int = 8,
                       hops: int = 4) -> list[list[bytes]]:
    """Host-agent batches of ``flows`` flows at 100 Mbit/s, a standing queue, 132
    records per datagram: what a busy demo agent ships."""
    out = []
    k = 0
    seq = 0
    for _ in range(n_batches):
        dgrams = []
        for _ in range(datagrams):
            r = np.zeros(132, HOST_RECORD_DTYPE)
            i = np.arange(k, k + r.size)
            k += r.size
            f = i % flows
            r["src_ip"] = 0x0A010000 + f
            r["dst_ip"] = 0x0A020000 + f
            r["src_port"] = 49152 + f
            r["dest_qp"] = 256 + f
            r["orig_dport"] = ROCEV2_UDP_PORT
            r["opcode"] = 0x0A
            r["psn"] = i // flows
            r["hop_count"] = hops
            r["instruction_bitmap"] = HPCC_INSTRUCTION_BITMAP
            r["ds_id"] = INT_DS_ID_HPCC
            r["ds_instruction"] = HPCC_DS_INSTRUCTION
            h = r["hops"]
            h["node_id"][:, :hops] = np.arange(1, hops + 1)
            h["egress_ts"] = (i * 90)[:, None] + np.arange(8)          # µs
            h["tx_bytes"] = ((i * 1100) & 0xFFFFFFFF)[:, None]
            h["queue_bytes"] = 3000
            h["line_rate"] = 100
            dgrams.append(encode_batch(r, agent_id=1, batch_seq=seq))
            seq += 1
        out.append(dgrams)
    return out


def loop_latency(batches: list[list[bytes]], max_samples: int
                 ) -> tuple[float, float, float, float]:
    """(p50, p99 of telemetry -> decision, mean wall and CPU ms per batch) with the
    HPCC loop; CPU time is the figure to compare on a busy machine."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # the agents: feedback lands here
    sink.bind(("127.0.0.1", 0))
    eng = HpccEngine(n_flows=64, params=HpccParams(base_rtt_s=400e-6))
    sender = FeedbackSender(n_flows=64)
    loop = HpccLoop(engine=eng, sender=sender, max_samples_per_flow=max_samples,
                    resolve=lambda s: FeedbackTarget(agent=sink.getsockname(),
                                                     flow_id=int(s["dest_qp"]),
                                                     max_rate_bps=100e6))
    col = Collector(CollectorConfig(report_port=0, agent_port=0, flow_capacity=64),
                    listeners=[loop])
    try:
        t0, c0 = time.perf_counter(), time.thread_time()
        for b in batches:
            col.feed_agent_batches(b)
        per_batch_ms = (time.perf_counter() - t0) / len(batches) * 1e3
        cpu_ms = (time.thread_time() - c0) / len(batches) * 1e3
    finally:
        sender.close()
        sink.close()
    s = eng.stats().telemetry_to_decision
    return s.p50_s * 1e3, s.p99_s * 1e3, per_batch_ms, cpu_ms


def socket_rate(kind: str, datagrams: list[bytes], rounds: int = 4,
                config: CollectorConfig | None = None, native: bool = True
                ) -> tuple[float, float, dict[str, float]]:
    """From the socket into the tables on one core: (samples/s, hop records/s) of the
    collector thread's CPU time, and its share per stage.  The datagrams are sent while
    the collector is held, so they wait in its socket as under load, then drained.
    ``native=False``: the tables' numpy path instead of tables.c."""
    cfg = config or CollectorConfig(report_port=0, agent_port=0, flow_capacity=1 << 16,
                                    rcvbuf_bytes=256 << 20)
    with Collector(cfg) as c, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        c.hops.native = c.flows.native = native and c.hops.native
        dest = c.report_address if kind == "report" else c.agent_address
        assert dest is not None
        tx.connect(dest)
        count = "report_datagrams" if kind == "report" else "agent_datagrams"
        samples = "reports" if kind == "report" else "host_records"
        hops = "report_hop_records" if kind == "report" else "host_hop_records"
        st0 = None
        for r in range(rounds + 1):    # the first round warms up
            if r == 1:
                st0 = c.stats()
            before = c.stats()
            with c._lock:
                for d in datagrams:
                    tx.send(d)
            want = getattr(before, count) + before.socket_drops + len(datagrams)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                s = c.stats()
                if getattr(s, count) + s.socket_drops >= want:
                    break
                time.sleep(0.005)
        st = c.stats()
    assert st0 is not None
    cpu = {k: (st.stage_ns[k] - st0.stage_ns[k]) / 1e9 for k in st.stage_ns}
    total = sum(cpu.values())
    if st.socket_drops != st0.socket_drops:
        print(f"  ({st.socket_drops - st0.socket_drops} datagrams dropped by the kernel)")
    return ((getattr(st, samples) - getattr(st0, samples)) / total,
            (getattr(st, hops) - getattr(st0, hops)) / total,
            {k: v / total for k, v in cpu.items()})


@dataclass
class Drain:
    """One pre-filled backlog drained by ``n`` collector processes."""

    n: int
    sent: int
    #: reports each process took into its tables (the steering program's split)
    split: list[int]
    drops: int
    #: release -> the last process's last round (CLOCK_MONOTONIC, the processes' own)
    wall_s: float
    #: the busiest process's ingest CPU (its collector thread: receive .. listeners)
    busiest_cpu_s: float

    @property
    def rate(self) -> float:
        return sum(self.split) / self.wall_s

    @property
    def cpu_rate(self) -> float:
        return sum(self.split) / self.busiest_cpu_s


def _send(tx: socket.socket, datagrams: list[bytes], n: int, cpus: list[int] | None) -> None:
    """``datagrams`` out of ``tx``; with ``cpus`` (the processes are pinned), each
    process's share from its core, so the kernel receives it there (loopback: in the
    sender's context), as a NIC's receive queue pinned to that core would."""
    if not cpus:
        for d in datagrams:
            tx.send(d)
        return
    where = [flow_index(d, n) for d in datagrams]
    old = os.sched_getaffinity(0)
    try:
        for i in range(n):
            os.sched_setaffinity(0, {cpus[i % len(cpus)]})
            for d, k in zip(datagrams, where):
                if k == i:
                    tx.send(d)
    finally:
        os.sched_setaffinity(0, old)


def prefill_drain(sh: CollectorShards, datagrams: list[bytes], poll_s: float = 0.25) -> Drain:
    """Send ``datagrams`` into the held processes of ``sh`` (the kernel's steering puts
    each in its process's socket queue; the sender is done before the clock starts),
    release them all at once, and time until every report is in the tables: from the
    release to the latest ``last_round_ns`` of the processes, their own clock stamps,
    so the bench polls their counters only every ``poll_s`` to see that they are done."""
    assert sh.report_address is not None
    before = sh.shard_stats()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        tx.connect(sh.report_address)
        sh.hold()
        try:
            _send(tx, datagrams, sh.n, sh.cpus)
        finally:
            t0 = sh.release()
    want = sum(p.report_datagrams + p.socket_drops for p in before) + len(datagrams)
    deadline = time.monotonic() + 120
    while True:
        time.sleep(poll_s)
        after = sh.shard_stats()
        if sum(p.report_datagrams + p.socket_drops for p in after) >= want:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{sh.n} collector processes did not drain {len(datagrams)} "
                               "reports within 120 s")
    split = [a.reports - b.reports for a, b in zip(after, before)]
    cpu = [sum(a.stage_ns.values()) - sum(b.stage_ns.values()) for a, b in zip(after, before)]
    end = max(a.last_round_ns for a, k in zip(after, split) if k)
    return Drain(n=sh.n, sent=len(datagrams), split=split,
                 drops=sum(a.socket_drops - b.socket_drops for a, b in zip(after, before)),
                 wall_s=(end - t0) / 1e9, busiest_cpu_s=max(cpu) / 1e9)


def shard_scaling(n: int, datagrams: list[bytes], rounds: int, pin: bool = False
                  ) -> dict[int, list[Drain]]:
    """1 process and ``n`` processes (each set started once, on its own port, idle while
    the other runs), ``rounds`` pre-filled backlogs each, alternating which goes first;
    a first backlog each warms the tables and is not kept.  ``pin``: process i on core
    i (``CollectorShards(cpus=...)``), its share sent from there."""
    cpus = sorted(os.sched_getaffinity(0))[:n] if pin else None
    # a queued 5-hop report costs the socket ~1 KiB of skb (truesize) on loopback
    cfg = CollectorConfig(report_port=0, agent_port=None, flow_capacity=1 << 16,
                          rcvbuf_bytes=min(1 << 30, max(256 << 20, 1536 * len(datagrams))))
    out: dict[int, list[Drain]] = {1: [], n: []}
    with CollectorShards(cfg, 1, cpus=cpus) as one, CollectorShards(cfg, n, cpus=cpus) as many:
        for sh in (one, many):
            prefill_drain(sh, datagrams[: len(datagrams) // 4])
        for r in range(rounds):
            for sh in ((one, many) if r % 2 == 0 else (many, one)):
                out[sh.n].append(prefill_drain(sh, datagrams))
    return out


def _ingest_worker(reports: list[bytes], batch: int, go: Any, q: Any) -> None:
    """A process running the collector's decode + tables on ``reports`` in memory
    (``batch`` 0: a pure arithmetic loop instead, no memory beyond the core's caches)."""
    if batch == 0:
        go.wait()
        t0, c0 = time.monotonic_ns(), time.thread_time_ns()
        x = 0
        for i in range(len(reports) * 20):
            x += i * i
        q.put((t0, time.monotonic_ns(), time.thread_time_ns() - c0, len(reports)))
        return
    c = Collector(CollectorConfig(report_port=0, agent_port=None, flow_capacity=1 << 16))
    batches = [reports[i : i + batch] for i in range(0, len(reports), batch)]
    for b in batches[:8]:
        c.feed_reports(b)                     # warm: tables touched, code loaded
    go.wait()                                 # a barrier: all processes start at once
    t0, c0 = time.monotonic_ns(), time.thread_time_ns()
    for b in batches:
        c.feed_reports(b)
    q.put((t0, time.monotonic_ns(), time.thread_time_ns() - c0, len(reports)))


def parallel_ingest(n: int, reports: list[bytes], batch: int = 2048) -> tuple[float, float]:
    """The collector's decode + tables from memory (no sockets, no kernel) in ``n``
    processes at once: (reports/s of wall time from the first start to the last end,
    reports/s of the slowest process's CPU x n).  What the machine's cores give the
    collector's own work in parallel, the ceiling of the socket figure.  ``batch`` 0:
    an arithmetic loop instead (``_ingest_worker``), what the cores give work that
    shares nothing."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    go, q = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_ingest_worker, args=(reports, batch, go, q)) for _ in range(n)]
    for p in procs:
        p.start()
    go.wait(timeout=300)
    res = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    total = sum(r[3] for r in res)
    wall = (max(r[1] for r in res) - min(r[0] for r in res)) / 1e9
    return total / wall, total / (max(r[2] for r in res) / 1e9)


_BLASTER = """
import socket, sys, time
data = sys.stdin.buffer.read()
port, secs, size = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
msgs = [data[i:i + size] for i in range(0, len(data), size)]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", port))
end = time.monotonic() + secs
while time.monotonic() < end:
    for m in msgs:
        try:
            s.send(m)
        except OSError:
            pass
"""


def _rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(x.split()[1]) for x in fh if x.startswith("VmRSS:"))


def soak(distinct: list[bytes], seconds: float) -> None:
    """Reports as fast as a sender process can send them for ``seconds``: what goes in,
    what the kernel drops (counted), and the collector's memory once a second."""
    size = len(distinct[0])
    with Collector(CollectorConfig(report_port=0, agent_port=None, flow_capacity=1 << 16)) as c:
        port = c.report_address[1]  # type: ignore[index]
        p = subprocess.Popen([sys.executable, "-c", _BLASTER, str(port), str(seconds),
                              str(size)], stdin=subprocess.PIPE)
        assert p.stdin is not None
        p.stdin.write(b"".join(distinct[:512]))
        p.stdin.close()
        rss = []
        t0 = time.monotonic()
        while p.poll() is None:
            time.sleep(1.0)
            rss.append(_rss_kib())
        p.wait()
        time.sleep(0.5)
        wall = time.monotonic() - t0
        st = c.stats()
    half = len(rss) // 2
    print(f"soak {seconds:g} s: {st.reports / wall:,.0f} reports/s decoded "
          f"({st.report_hop_records / wall:,.0f} hop records/s), {st.socket_drops} dropped "
          f"by the kernel (counted), {st.malformed and sum(st.malformed.values()) or 0} "
          f"malformed; RSS MiB first/middle/last/max {rss[0] / 1024:.0f}/"
          f"{rss[half] / 1024:.0f}/{rss[-1] / 1024:.0f}/{max(rss) / 1024:.0f}")


def rx_compare(count: int = 20000) -> None:
    """us of this thread's CPU per datagram to empty a socket: recv() into new bytes
    objects, recvmsg_into and recvmmsg into a slot pool (``controller.int.rxbatch``,
    made and touched before the clock starts), same datagrams.  216 B: a 5-hop report."""

    from controller.int.rxbatch import RxPool, native_available
    methods = ["recv", "recvmsg_into"] + (["recvmmsg", "recvmmsg-512"] if native_available()
                                          else [])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        for size, n in ((160, count), (216, count), (548, count), (16668, count // 10)):
            cells = []
            for how in methods:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
                    rx.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)   # SO_RCVBUFFORCE
                    rx.bind(("127.0.0.1", 0))
                    rx.setblocking(False)
                    payload = b"x" * size
                    for _ in range(n):
                        tx.sendto(payload, rx.getsockname())
                    got = 0
                    pool = None if how == "recv" else RxPool(
                        rx, slots=1024 if size < 9000 else 64,
                        stride=9216 if size < 9000 else 65536, method=how.split("-")[0],
                        # recvmmsg-512: the collector's report pool, 512-byte dense rows
                        head=512 if how == "recvmmsg-512" else None)
                    if pool is not None:   # its pages faulted in before the clock too
                        pool.buf.fill(1)
                        if pool.spill is not None:
                            pool.spill.fill(1)
                    t0 = time.thread_time()
                    if pool is None:
                        try:
                            while True:
                                rx.recv(65535)
                                got += 1
                        except BlockingIOError:
                            pass
                    else:
                        while (k := pool.receive()) > 0:
                            got += k
                    dt = time.thread_time() - t0
                cells.append(f"{how} {1e6 * dt / max(got, 1):.2f} us ({got}/{n})")
            print(f"  {size:>5} B: " + ", ".join(cells))


def rate(fn, *args, repeat: int = 3) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """(items per second of this thread's CPU time, best of ``repeat``, items per run).
    CPU time, not wall time: on a shared machine the wall clock of one repetition
    swings 2-5x with the other jobs, the CPU time much less."""
    best = float("inf")
    count = 0
    for _ in range(repeat):
        t = time.thread_time()
        count = fn(*args)
        best = min(best, time.thread_time() - t)
    return count / best, count


def _ship(recs: np.ndarray, i: int) -> np.ndarray:
    """``recs`` as agent ``i`` % 8 of 64 flows with advancing PSNs and timestamps."""
    r = recs.copy()
    k = np.arange(len(r)) + i * len(r)
    r["src_ip"], r["dst_ip"] = 0x0A000001 + i % 8, 0x0A000101
    r["src_port"], r["dest_qp"], r["orig_dport"] = 49152 + k % 64, 0x100 + k % 64, ROCEV2_UDP_PORT
    r["psn"], r["psn_count"] = k, 1
    h = r["hops"]
    h["node_id"][:, :r["hop_count"][0]] = np.arange(1, r["hop_count"][0] + 1)
    h["egress_ts"] = (k * 10)[:, None] + np.arange(8)
    h["tx_bytes"] = ((k * 1100) & 0xFFFFFFFF)[:, None]
    h["line_rate"] = 100000
    return r


def _shares(share: dict[str, float]) -> str:
    return "CPU: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in share.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=int, default=200_000)
    ap.add_argument("--hops", type=int, default=5, choices=range(1, 9))
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--scapy-reports", type=int, default=2000)
    ap.add_argument("--udp", action="store_true", help="also measure over loopback UDP")
    ap.add_argument("--rx", action="store_true",
                    help="also compare recv, recvmsg_into and recvmmsg into a slot pool")
    ap.add_argument("--soak", type=float, default=0, metavar="S",
                    help="also blast reports for S seconds, memory once a second")
    ap.add_argument("--shards", type=int, default=1,
                    help="also compare N collector processes behind one port with one")
    ap.add_argument("--backlog", type=int, default=400_000,
                    help="--shards: reports pre-filled into the held processes per round")
    ap.add_argument("--rounds", type=int, default=5, help="--shards: backlogs each way")
    ap.add_argument("--socket", action="store_true",
                    help="also measure from the socket into the tables (CPU of one core)")
    ap.add_argument("--loop", action="store_true",
                    help="also measure the HPCC loop latency on host-agent batches")
    a = ap.parse_args(argv)
    distinct = make_reports(min(a.reports, 4096), a.hops)
    reports = (distinct * (a.reports // len(distinct) + 1))[: a.reports]
    batches = [reports[i : i + a.batch] for i in range(0, len(reports), a.batch)]

    def vec_decode() -> int:
        dec = ReportDecoder()
        return sum(len(dec.decode(b, 0).hops) for b in batches)

    def vec_ingest(native: bool = True) -> int:
        c = Collector(CollectorConfig(report_port=0, agent_port=0, flow_capacity=1 << 16))
        c.hops.native = c.flows.native = native and c.hops.native
        return sum(len(c.feed_reports(b).hops) for b in batches)

    recs = np.zeros(max_records(HOST_RECORD_DTYPE.itemsize), HOST_RECORD_DTYPE)
    recs["hop_count"] = a.hops
    recs["instruction_bitmap"] = HPCC_INSTRUCTION_BITMAP
    recs["ds_id"] = INT_DS_ID_HPCC
    recs["ds_instruction"] = HPCC_DS_INSTRUCTION
    agent = [encode_batch(recs, agent_id=1, batch_seq=i) for i in range(
        max(1, a.reports // len(recs)))]

    def host_decode() -> int:
        dec = HostBatchDecoder()
        return sum(len(dec.decode(agent[i : i + 32], 0).hops) for i in range(0, len(agent), 32))

    print(f"collector decoding, {a.reports} reports x {a.hops} hops, batches of {a.batch}")
    v, n = rate(vec_decode)
    vn, _ = rate(lambda: vec_ingest(False))
    vi, _ = rate(vec_ingest)
    s, _ = rate(struct_loop, reports)
    sc, _ = rate(scapy_loop, reports[: a.scapy_reports], repeat=1)
    h, hn = rate(host_decode)
    print(f"{'path (per second of CPU, best of 3)':<44}{'hop records/s':>16}{'vs struct':>10}")
    for name, r in (
        ("vectorised decode (ReportDecoder)", v),
        ("vectorised decode + tables (numpy)", vn),
        ("vectorised decode + tables (tables.c)", vi),
        ("per-record struct loop (baseline)", s),
        (f"per-report scapy parse ({a.scapy_reports} reports)", sc),
        ("host-agent batches (HostBatchDecoder)", h),
    ):
        print(f"{name:<44}{r:>16,.0f}{r / s:>9.1f}x")
    print(f"decoded {n} hop records per run; host records: {hn} hops per run")
    if a.rx:
        print("emptying a socket, us of CPU per datagram (received/sent):")
        rx_compare()
    if a.socket:
        print("from the socket into the tables, per second of the collector thread's CPU "
              "(one core)")
        hs = [encode_batch(_ship(recs, i), agent_id=1, batch_seq=i) for i in range(2000)]
        for native in (False, True, False, True):   # tables numpy / tables.c, alternating
            tag = "tables.c" if native else "numpy tables"
            hr_s, hh_s, share = socket_rate("agent", [d for d in hs][:1500], native=native)
            print(f"  [{tag}] host records, {len(recs)} per datagram: {hr_s:,.0f} records/s "
                  f"({hh_s:,.0f} hop records/s); " + _shares(share))
            rr_s, rh_s, share = socket_rate("report", reports[:60000], native=native)
            print(f"  [{tag}] Telemetry Reports, {a.hops} hops each: {rr_s:,.0f} reports/s, "
                  f"{rh_s:,.0f} hop records/s ({rh_s / s:.1f}x the struct loop's decode "
                  "alone); " + _shares(share))
    if a.shards > 1:
        load = os.getloadavg()
        print(f"{a.shards} collector processes behind one port vs one, {os.cpu_count()} cores, "
              f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1/5/15 min)")
        mem = reports[: min(len(reports), 200_000)]
        for what, batch in (("an arithmetic loop", 0), ("decode + tables in memory", a.batch)) * 2:
            p1, c1 = parallel_ingest(1, mem, batch)
            pn, cn = parallel_ingest(a.shards, mem, batch)
            print(f"  {what}, {a.shards} processes at once vs one: "
                  f"{pn / (a.shards * p1):.2f} x N x one by wall time, "
                  f"{cn / (a.shards * c1):.2f} by the slowest process's CPU"
                  + (f" ({pn:,.0f} vs {p1:,.0f} reports/s)" if batch else ""))
        backlog = (reports * (a.backlog // len(reports) + 1))[: a.backlog]
        for pin in (False, True):
            runs = shard_scaling(a.shards, backlog, a.rounds, pin=pin)
            print(f"  pre-filled backlogs of {len(backlog):,} reports, released at once, "
                  f"{a.rounds} rounds alternating (processes' own end stamps), "
                  + ("process i pinned to core i, its share sent from there:" if pin else
                     "processes where the scheduler puts them:"))
            for d1, dn in zip(runs[1], runs[a.shards]):
                print(f"    one {d1.rate:>10,.0f} reports/s ({d1.wall_s * 1e3:.0f} ms); "
                      f"{a.shards} {dn.rate:>10,.0f} ({dn.wall_s * 1e3:.0f} ms, split "
                      f"{'/'.join(str(k) for k in dn.split)}): "
                      f"{dn.rate / (a.shards * d1.rate):.2f} x N x one; by the busiest "
                      f"process's CPU {dn.cpu_rate / (a.shards * d1.cpu_rate):.2f}"
                      + (f"  ({d1.drops + dn.drops} dropped)" if d1.drops + dn.drops else ""))
            for what, f in (("wall time", lambda d: d.rate), ("busiest CPU", lambda d: d.cpu_rate)):
                one = sorted(f(d) for d in runs[1])
                many = sorted(f(d) for d in runs[a.shards])
                med = many[len(many) // 2] / (a.shards * one[len(one) // 2])
                print(f"    by {what}: median {many[len(many) // 2]:,.0f} vs one "
                      f"{one[len(one) // 2]:,.0f} reports/s = {med:.2f} x N x one "
                      f"(best/best {many[-1] / (a.shards * one[-1]):.2f})")
        load = os.getloadavg()
        print(f"  load after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if a.soak:
        soak(distinct, a.soak)
    if a.udp:
        hr, got, drops, sent_s = udp_end_to_end(distinct, a.reports)
        print(f"loopback UDP: {a.reports} reports sent in {sent_s:.2f}s, {got} decoded, "
              f"{drops} dropped by the kernel; {hr:,.0f} hop records/s end to end")
    if a.loop:
        demo = demo_agent_batches(n_batches=20, datagrams=16)
        print("HPCC loop on host-agent batches (8 flows, 16 x 132 records per batch)")
        print(f"{'engine gets':<26}{'p50 ms':>9}{'p99 ms':>9}{'ms/batch':>10}{'CPU ms':>8}")
        base = None
        for name, k in (("every sample (baseline)", 1 << 30), ("16 samples per flow", 16)):
            p50, p99, per, cpu = loop_latency(demo, k)
            base = base or cpu
            print(f"{name:<26}{p50:>9.2f}{p99:>9.2f}{per:>10.2f}{cpu:>8.2f}  {base / cpu:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
