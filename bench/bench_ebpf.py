"""Host INT sink: kernel cost per packet, and host-record decoding rate.

Three figures, each beside a baseline measured in the same run:

1. ring decoder: records/s of ``ebpf.ringbuf.decode_slots`` (what the agent does with
   the mmapped ring) against a per-record Python loop (what a bcc ring_buffer_poll
   callback does), on the same synthetic ring; the two must decode identical bytes.
2. controller-side batch decode: records/s viewing agent datagrams as
   HOST_RECORD_DTYPE and pulling out PSNs and per-hop queue/tx fields.
3. sink cost (root, bcc): ns per packet from kernel.bpf_stats_enabled (run_time_ns /
   run_cnt) for INT packets of 1 and 8 hops and plain RoCEv2 (trains of consecutive
   PSNs, as a QP sends them), at tc and at XDP, against a tc program that only
   returns, on the same interface; 8 hops again with a host record per packet
   (run_packets=1, what runs of packets save); the same with the
   INT echo on (the sink also keeps each QP's hops), and the echo's egress program
   appending 8 or 1 hops to ACKs against an empty program at egress; then records/s
   through the agent (ring copy-out, batching, UDP to a local collector).

Examples:
  python -m bench.bench_ebpf                  # all three
  python -m bench.bench_ebpf --records 500000 --packets 20000
  python -m bench.bench_ebpf --no-kernel      # decoders only (no root needed)
  python -m bench.bench_ebpf --profile 3      # the sink's cost by part (builds with
                                              # parts left out, 3 alternating rounds)
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from ebpf.ringbuf import decode_slots, slot_size
from formats import int_md, roce
from formats.agent_batch import AGENT_BATCH_HEADER_LEN, encode_batch, max_records
from formats.int_md import HOST_RECORD_DTYPE, HopRecord


def synthetic_ring(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(ring bytes with n committed records, the records) - random record contents."""
    rng = np.random.default_rng(seed)
    size = HOST_RECORD_DTYPE.itemsize
    slot = slot_size(HOST_RECORD_DTYPE)
    body = rng.integers(0, 256, (n, size), dtype=np.uint8)
    ring = np.zeros((n, slot), np.uint8)
    ring[:, :4] = np.frombuffer(np.uint32(size).tobytes(), np.uint8)
    ring[:, 8:8 + size] = body
    return ring.reshape(-1), body.reshape(-1).view(HOST_RECORD_DTYPE)


def per_record_loop(ring: np.ndarray) -> bytes:
    """Baseline: one Python step per record, as a ring_buffer_poll callback runs."""
    slot, size = slot_size(HOST_RECORD_DTYPE), HOST_RECORD_DTYPE.itemsize
    mv = memoryview(ring.tobytes())
    hdr = struct.Struct("<I")
    out = []
    for off in range(0, len(mv), slot):
        (ln,) = hdr.unpack_from(mv, off)
        if ln & 0x80000000:
            break
        if not ln & 0x40000000:
            out.append(bytes(mv[off + 8:off + 8 + size]))
    return b"".join(out)


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_decoders(n: int, repeat: int) -> None:
    ring, recs = synthetic_ring(n, seed=1)
    fast, used = decode_slots(ring, HOST_RECORD_DTYPE)
    slow = per_record_loop(ring)
    assert used == n and fast.tobytes() == slow == recs.tobytes(), "decoders disagree"
    t_fast = best_of(lambda: decode_slots(ring, HOST_RECORD_DTYPE), repeat)
    t_slow = best_of(lambda: per_record_loop(ring), max(1, repeat // 2))
    print(f"ring decode     {n:>8} records  vectorised {n / t_fast / 1e6:8.2f} M rec/s"
          f"   per-record loop {n / t_slow / 1e6:6.2f} M rec/s   x{t_slow / t_fast:6.1f}")

    per = max_records(HOST_RECORD_DTYPE.itemsize)
    datagrams = [encode_batch(recs[i:i + per], agent_id=1, batch_seq=k)
                 for k, i in enumerate(range(0, n, per))]

    def controller_side() -> float:
        body = b"".join(d[AGENT_BATCH_HEADER_LEN:] for d in datagrams)
        r = np.frombuffer(body, HOST_RECORD_DTYPE)
        hops = r["hops"]
        return float(r["psn"].sum() + hops["queue_bytes"].sum() + hops["tx_bytes"].sum())

    def controller_loop(dgrams: list[bytes]) -> float:
        """Baseline: one record at a time, as a decoder without numpy views would."""
        total = 0
        for d in dgrams:
            for j in range(AGENT_BATCH_HEADER_LEN, len(d), HOST_RECORD_DTYPE.itemsize):
                rec = np.frombuffer(d, HOST_RECORD_DTYPE, 1, j)[0]
                total += int(rec["psn"]) + int(rec["hops"]["queue_bytes"].sum())
        return float(total)

    t_vec = best_of(controller_side, repeat)
    sub = datagrams[:max(1, min(n, 20_000) // per)]
    m_done = sum((len(d) - AGENT_BATCH_HEADER_LEN) // HOST_RECORD_DTYPE.itemsize for d in sub)
    t_loop = best_of(lambda: controller_loop(sub), 1)
    print(f"batch decode    {n:>8} records  vectorised {n / t_vec / 1e6:8.2f} M rec/s"
          f"   per-record loop {m_done / t_loop / 1e6:6.2f} M rec/s   "
          f"x{(t_loop / m_done) / (t_vec / n):6.1f}")


PASS_C = b"int pass_all(struct __sk_buff *skb) { return -1; }"


def psn_train(frame: bytes, n: int) -> list[bytes]:
    """``n`` copies of a RoCEv2 frame (with or without INT) with PSNs 0, 1, ... n - 1,
    as a QP sends them (the ICRC is left as it was: nothing here verifies it)."""
    bth = 42
    if struct.unpack_from("!H", frame, 36)[0] != roce.ROCEV2_UDP_PORT:
        bth += int_md.INT_SHIM_LEN + 4 * frame[43]  # behind the INT header
    out = []
    for psn in range(n):
        f = bytearray(frame)
        f[bth + 9:bth + 12] = (psn & 0xFFFFFF).to_bytes(3, "big")
        out.append(bytes(f))
    return out


def _sink_cost(sink, base_fd: int, tx: socket.socket, kinds: dict[str, list[bytes]],
               hook: str) -> None:
    from ebpf.progstats import prog_run_stats

    for name, frames in kinds.items():
        s0, b0 = sink.run_stats(), prog_run_stats(base_fd)
        for frame in frames:
            tx.send(frame)
        time.sleep(0.2)
        sink.read()
        s1, b1 = sink.run_stats(), prog_run_stats(base_fd)
        ns = (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
        bns = (b1[0] - b0[0]) / max(1, b1[1] - b0[1])
        print(f"  {hook:<3} {name:<13} sink {ns:6.0f} ns/pkt  baseline {bns:4.0f} ns/pkt"
              f"  x{ns / bns if bns else float('nan'):5.1f}  runs {s1[1] - s0[1]}")


def _agent_rate(h2, tx: socket.socket, frames: list[bytes]) -> None:
    """Records/s through HostAgent.read: ring copy-out, batching, UDP to a collector
    (a record per packet here, ``run_packets=1``, to load the path)."""
    from ebpf.agent import AgentConfig, HostAgent
    from ebpf.sink import SinkConfig

    with h2.enter():
        collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        collector.bind(("127.0.0.1", 0))
        collector.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    cfg = AgentConfig(iface=h2.ifname, netns=h2.name, controller=collector.getsockname(),
                      queue_batches=4096, sink=SinkConfig(ringbuf_pages=8192, run_packets=1))
    try:
        with HostAgent(cfg) as agent:
            for f in frames:
                tx.send(f)
            time.sleep(0.3)
            t0 = time.perf_counter()
            got = agent.read()
            dt = time.perf_counter() - t0
            st = agent.stats().shipper
        print(f"agent read+ship {got.size:>8} records  {got.size / dt / 1e6:8.2f} M rec/s"
              f"   (sent {st.records_sent}, dropped {st.records_dropped})")
    finally:
        collector.close()


def _echo_cost(h1, h2, tx: socket.socket, base_fd: int, packets: int, orig: bytes,
               hops: list[HopRecord]) -> None:
    """The INT echo: the sink with its per-QP hop store, and the egress program that
    appends the hops to ACKs (ACKs from a UDP socket in h2), each against an empty
    program on the same hook."""
    from bcc import BPF

    from common.kernel.tc import attach_tc
    from ebpf.progstats import prog_run_stats
    from ebpf.sink import IntSink, SinkConfig

    base = BPF(text=PASS_C)
    att = None
    with h2.enter():
        ack_tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ack_tx.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = DO: ID 0, DF
        ack_tx.bind((h2.ip, 0))
    try:
        efn = base.load_func(b"pass_all", BPF.SCHED_CLS)
        att = attach_tc(efn.fd, "pass_all", h2.ifname, netns=h2.name, direction="egress",
                        prio=1)
        ack = roce.build_udp_payload(src=h2.ip, dst=h1.ip, sport=ack_tx.getsockname()[1],
                                     opcode=roce.Opcode.ACKNOWLEDGE, dest_qp=3, psn=0,
                                     aeth=(0, 1))
        with IntSink(h2.ifname, netns=h2.name, config=SinkConfig(echo=True)) as sink:
            _sink_cost(sink, base_fd, tx,
                       {"INT, 8 hops": psn_train(int_md.insert_int(orig, hops), packets),
                        "INT, 1 hop": psn_train(int_md.insert_int(orig, hops[:1]), packets)},
                       "tc+echo")
            for n in (8, 1):
                tx.send(int_md.insert_int(orig, hops[:n]))  # the QP's latest hops
                time.sleep(0.05)
                e0, b0 = sink.echo_run_stats(), prog_run_stats(efn.fd)
                for _ in range(packets):
                    ack_tx.sendto(ack, (h1.ip, 4791))
                time.sleep(0.2)
                e1, b1 = sink.echo_run_stats(), prog_run_stats(efn.fd)
                ns = (e1[0] - e0[0]) / max(1, e1[1] - e0[1])
                bns = (b1[0] - b0[0]) / max(1, b1[1] - b0[1])
                print(f"  egress echo {n} hop{'s' if n > 1 else ' '} on ACKs  {ns:6.0f} ns/pkt  "
                      f"baseline {bns:4.0f} ns/pkt  x{ns / bns if bns else float('nan'):5.1f}"
                      f"  runs {e1[1] - e0[1]}")
    finally:
        if att is not None:
            att.detach()
        base.cleanup()
        ack_tx.close()


#: bench_ebpf --profile: sink builds with parts left out (BENCH_OMIT bits of int_sink.c)
PROFILE_VARIANTS: dict[str, int] = {
    "whole": 0,
    "without the host record in the ring": 1,
    "without the hop loop": 2,
    "without the per-flow update (so a record per packet)": 4,
    "without removing the INT bytes": 8,
    "without loading the hop stack (nor the hop loop)": 16 | 2,
    "only checks and loads, then pass": 1 | 2 | 4 | 8,
    "echo: without copying the hops": 32,
}


def _profile(h2, tx: socket.socket, base_fd: int, frames: list[bytes], rounds: int,
             echo: bool) -> None:
    """Median ns/packet of each PROFILE_VARIANTS build, rounds alternating."""
    from ebpf.progstats import prog_run_stats
    from ebpf.sink import IntSink, SinkConfig

    ratios: dict[str, list[tuple[float, float]]] = {k: [] for k in PROFILE_VARIANTS}
    for _ in range(rounds):
        for name, omit in PROFILE_VARIANTS.items():
            cfg = SinkConfig(bench_omit=omit, echo=echo)
            with IntSink(h2.ifname, netns=h2.name, config=cfg) as sink:
                s0, b0 = sink.run_stats(), prog_run_stats(base_fd)
                for frame in frames:
                    tx.send(frame)
                time.sleep(0.2)
                s1, b1 = sink.run_stats(), prog_run_stats(base_fd)
            ns = (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
            bns = (b1[0] - b0[0]) / max(1, b1[1] - b0[1])
            ratios[name].append((ns, bns))
    print(f"sink profile, 8 hops at tc{' with the echo' if echo else ''} ({rounds} alternating "
          f"rounds of {len(frames)} packets, medians)")
    for name, runs in ratios.items():
        ns = float(np.median([r[0] for r in runs]))
        x = float(np.median([r[0] / r[1] for r in runs if r[1]]))
        print(f"  {name:<52} {ns:6.0f} ns/pkt  x{x:5.1f}")


def bench_kernel(packets: int, profile: int = 0) -> None:
    from bcc import BPF

    from common.kernel.netns import two_hosts
    from common.kernel.tc import attach_tc
    from ebpf.progstats import bpf_stats_enabled
    from ebpf.sink import IntSink, SinkConfig

    with two_hosts("teb", subnet="10.77.9.0/24") as (h1, h2), bpf_stats_enabled():
        with h1.enter():
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx.bind((h1.ifname, 0))
        base = BPF(text=PASS_C)
        att = None
        try:
            fn = base.load_func(b"pass_all", BPF.SCHED_CLS)
            att = attach_tc(fn.fd, "pass_all", h2.ifname, netns=h2.name, prio=1)
            orig = roce.build_frame(eth_src=h1.mac, eth_dst=h2.mac, src=h1.ip, dst=h2.ip,
                                    sport=50000, opcode=roce.Opcode.SEND_ONLY, dest_qp=3,
                                    psn=0, payload=bytes(1024))
            hops = [HopRecord(node_id=i + 1, queue_occupancy=i, egress_ts=i, tx_bytes=i,
                              queue_bytes=i, line_rate=100_000) for i in range(8)]
            kinds = {"INT, 8 hops": psn_train(int_md.insert_int(orig, hops), packets),
                     "INT, 1 hop": psn_train(int_md.insert_int(orig, hops[:1]), packets),
                     "plain RoCEv2": psn_train(orig, packets)}
            if profile:
                for echo in (False, True):
                    _profile(h2, tx, fn.fd, kinds["INT, 8 hops"], profile, echo)
                return
            print(f"sink cost ({packets} packets each; baseline: a tc program that only "
                  "returns)")
            for hook in ("tc", "xdp"):
                with IntSink(h2.ifname, netns=h2.name, config=SinkConfig(hook=hook)) as sink:
                    _sink_cost(sink, fn.fd, tx, kinds, hook)
            # what the runs save: the same sink with a host record per packet
            with IntSink(h2.ifname, netns=h2.name, config=SinkConfig(run_packets=1)) as sink:
                _sink_cost(sink, fn.fd, tx, {"INT, 8 hops": kinds["INT, 8 hops"]},
                           "tc, a record per packet:")
            _echo_cost(h1, h2, tx, fn.fd, packets, orig, hops)
            _agent_rate(h2, tx, psn_train(int_md.insert_int(orig, hops),
                                          min(30_000, packets * 4)))
        finally:
            if att is not None:
                att.detach()
            base.cleanup()
            tx.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__[__doc__.index("Examples:"):])
    p.add_argument("--records", type=int, default=200_000, help="records to decode")
    p.add_argument("--repeat", type=int, default=5, help="best of N timings")
    p.add_argument("--packets", type=int, default=5_000, help="packets per kind (kernel)")
    p.add_argument("--no-kernel", action="store_true", help="skip the root/bcc part")
    p.add_argument("--profile", type=int, default=0, metavar="ROUNDS",
                   help="only the sink's cost by part: builds with parts left out, "
                        "ROUNDS alternating rounds")
    args = p.parse_args(argv)
    if args.records < 1 or args.packets < 1 or args.repeat < 1:
        print("bench_ebpf: --records, --packets and --repeat must be >= 1", file=sys.stderr)
        return 2
    if not args.profile:
        bench_decoders(args.records, args.repeat)
    if not args.no_kernel:
        if os.geteuid() != 0:
            print("sink cost: skipped (needs root)")
        else:
            bench_kernel(args.packets, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
