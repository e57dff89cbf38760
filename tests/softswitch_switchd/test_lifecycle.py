"""The switch process on its own: program and entries from the command line, pcap
captures, statistics, a clean SIGTERM exit, and a fuzz run of malformed frames."""
from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
from switchd_helpers import IPV4_FORWARD, chain, raw_socket, udp_frame

from softswitch.switchd import read_pcap

pytestmark = [pytest.mark.root]
TEST_PROGRAM = Path(__file__).resolve().parent / "switchd_test.p4"


def _entries(tmp: Path, c) -> Path:
    path = tmp / "routes.entries"
    lines = [f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a00000{i}/32 "
             f"MyIngress.ipv4_forward(dstAddr:0x{mac.replace(':', '')}, port:{i})"
             for i, mac in ((1, c.h1.mac), (2, c.h2.mac))]
    path.write_text("\n".join(lines) + "\n")
    return path


def _ping(c, count: int = 2) -> None:
    res = c.h1.run(["ping", "-c", str(count), "-i", "0.2", "-W", "3", c.h2.ip], check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_program_entries_pcap_and_clean_sigterm(tmp_path) -> None:
    pcaps = tmp_path / "pcap"
    with chain(tmp_path, 1) as c:
        s = c.switches[0]
        s.start(IPV4_FORWARD, "--entries", str(_entries(tmp_path, c)), "--pcap", str(pcaps),
                "--stats-interval", "0.5", "--name", "s1")
        _ping(c, 3)
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(10) == 0, s.log()
        log = s.log()
        assert "s1 device 1: in 6 out 6 pipeline drops 0" in log     # final statistics
        st = s.stats()
        for num, end in s.ports.items():
            p = next(p for p in st["ports"] if p["port"] == num)
            frames_in = read_pcap(pcaps / f"{end.ifname}_in.pcap")
            frames_out = read_pcap(pcaps / f"{end.ifname}_out.pcap")
            assert (len(frames_in), len(frames_out)) == (p["rx_packets"], p["tx_packets"]) == (3, 3)
        import contextlib
        import io

        from softswitch.__main__ import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["switch", "--print-stats", str(s.stats_file)]) == 0
        table = out.getvalue().splitlines()
        assert table[0].startswith("s1 device 1: in 6 out 6")
        assert table[2].split()[1:4] == [s.ports[1].ifname, "3", "3"]
        # the egress frame is the ingress frame forwarded: TTL one less
        h1_in = read_pcap(pcaps / f"{s.ports[1].ifname}_in.pcap")[0]
        h2_out = read_pcap(pcaps / f"{s.ports[2].ifname}_out.pcap")[0]
        assert h2_out[22] == h1_in[22] - 1


def test_without_a_program_frames_are_counted_not_processed(tmp_path) -> None:
    with chain(tmp_path, 1) as c:
        s = c.switches[0]
        s.start()
        c.h1.run(["ping", "-c", "2", "-i", "0.2", "-W", "1", c.h2.ip], check=False)
        s.proc.send_signal(signal.SIGINT)
        assert s.proc.wait(10) == 0, s.log()
        st = s.stats()
        assert st["pipeline"] is False and st["no_pipeline"] == 2
        assert "waiting for SetForwardingPipelineConfig" in s.log()


def _mutants(valid: bytes, n: int, rng: random.Random) -> list[bytes]:
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:     # random garbage of random length (>= Ethernet header)
            f = rng.randbytes(rng.randint(14, 1514))
        elif kind == 1:   # truncated valid frame
            f = valid[:rng.randint(14, len(valid) - 1)]
        elif kind == 2:   # flipped bytes in the headers
            b = bytearray(valid)
            for _ in range(rng.randint(1, 6)):
                b[rng.randint(12, 45)] = rng.randrange(256)
            f = bytes(b)
        elif kind == 3:   # IPv4 ethertype with garbage behind it
            f = valid[:12] + b"\x08\x00" + rng.randbytes(rng.randint(0, 60))
        else:             # wrong lengths and IHL
            b = bytearray(valid)
            b[14] = 0x40 | rng.randrange(16)
            b[16:18] = rng.randrange(65536).to_bytes(2, "big")
            b[38:40] = rng.randrange(65536).to_bytes(2, "big")
            f = bytes(b)
        out.append(f.ljust(14, b"\x00"))
    return out


@pytest.mark.parametrize("program", [IPV4_FORWARD, TEST_PROGRAM], ids=["ipv4_forward", "switchd_test"])
def test_fuzz_malformed_frames_then_forward(tmp_path, program: Path) -> None:
    with chain(tmp_path, 1) as c:
        s = c.switches[0]
        extra = ["--entries", str(_entries(tmp_path, c))] if program == IPV4_FORWARD else []
        s.start(program, *extra)
        rng = random.Random(1234)
        valid = udp_frame(c.h1, c.h2, 5555, bytes(20) + b"x" * 40)
        sock = raw_socket(c.h1, c.h1.ifname)
        try:
            for i, f in enumerate(_mutants(valid, 3000, rng)):
                sock.send(f)
                if i % 200 == 199:
                    time.sleep(0.02)   # let the switch keep up (its receive buffer is finite)
        finally:
            sock.close()
        time.sleep(0.5)
        assert s.proc.poll() is None, s.log()
        _ping(c) if program == IPV4_FORWARD else None
        from switchd_helpers import udp_socket
        rx, tx = udp_socket(c.h2, 5555), udp_socket(c.h1)
        try:
            tx.sendto(bytes(20) + b"after the fuzz", (c.h2.ip, 5555))
            assert rx.recv(2048).endswith(b"after the fuzz")
        finally:
            rx.close()
            tx.close()
        time.sleep(1.2)
        st = s.stats()
        assert st["pipeline_errors"] == 0, s.log()
        assert st["packets_in"] >= 2900        # the malformed frames went through the pipeline
        s.proc.terminate()
        assert s.proc.wait(10) == 0


def test_interface_removed_under_a_running_switch(tmp_path) -> None:
    """Deleting one port's link is logged; the other ports keep forwarding; clean exit."""
    with chain(tmp_path, 1, mirror_ports=1) as c:
        s = c.switches[0]
        s.start(IPV4_FORWARD, "--entries", str(_entries(tmp_path, c)))
        c.extra[0].close()                     # its veth (port 3 of the switch) goes with it
        time.sleep(0.3)
        _ping(c)
        s.proc.terminate()
        assert s.proc.wait(10) == 0, s.log()
        assert "port 3" in s.log() and "interface down or gone" in s.log()
        assert s.stats()["rx_errors"] == 0
