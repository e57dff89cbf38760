"""``tn_udp_blast --pps``: the pacing floor bench/bench_engine.py measures the engine
against (its ``floor`` row).  Real datagrams on loopback: it sends every one, in
order, shaped as RDMA WRITE MIDDLE packets (opcode, PSN) so the bench's capture reader
counts them, never sooner than its rate allows; bad arguments get a usage line and
exit 2.  (How evenly it spaces them is measured from a wire capture in the bench.)
"""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

BLAST = Path(__file__).resolve().parents[2] / "traffic" / "native" / "bin" / "tn_udp_blast"
pytestmark = pytest.mark.skipif(not BLAST.exists(),
                                reason="native programs not built (make -C traffic/native)")


def _receiver() -> tuple[socket.socket, int]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.93.2", 0))
    s.settimeout(10)
    return s, s.getsockname()[1]


def test_paced_blast_sends_every_frame_in_order_at_its_rate() -> None:
    rx, port = _receiver()
    n, pps, size = 400, 20_000, 1040
    try:
        t0 = time.monotonic()
        out = subprocess.run([str(BLAST), "--send", "--local", "127.0.93.1", "--peer",
                              "127.0.93.2", "--port", str(port), "-s", str(size), "-n", str(n),
                              "--pps", str(pps)], capture_output=True, text=True, timeout=30,
                             check=True).stdout.split()
        took = time.monotonic() - t0
        frames = [rx.recv(9216) for _ in range(n)]
    finally:
        rx.close()
    assert int(out[0]) == n and int(out[1]) == n * size
    assert took >= (n - 1) / pps          # a pacer is never early as a whole
    assert {len(f) for f in frames} == {size}
    assert {f[0] for f in frames} == {0x07}                  # RDMA WRITE MIDDLE
    assert [int.from_bytes(f[9:12], "big") for f in frames] == list(range(n))  # PSNs


@pytest.mark.parametrize("args", [["--pps", "-5"], ["--pps", "2e7"], ["-s", "4"]])
def test_bad_arguments_are_named_with_exit_2(args: list[str]) -> None:
    r = subprocess.run([str(BLAST), "--send", "--local", "127.0.93.1", "--peer", "127.0.93.2",
                        *args], check=False, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--pps" in r.stderr and "-s 12..9000" in r.stderr


def test_the_bench_blast_charges_both_ends_cpu_to_the_datagrams_delivered() -> None:
    """bench_engine's CPU floor: the batched blast's two processes' CPU time over the
    datagrams that reached the receiver (on loopback, no root).  The two rates are each
    process's own (the receiver's window starts at its first datagram, so it can read
    higher than the sender's); the counts are what must agree."""
    from bench import bench_engine

    r = bench_engine.run_blast(veth=False, size=1040, n=20_000)
    assert r["sent"] == 20_000 and 0 < r["delivered"] <= r["sent"]
    assert r["received_bytes"] == r["delivered"] * 1040
    assert r["received_bps"] > 0 and r["sent_bps"] > 0
    assert r["cpu_us_per_pkt"] > 0
