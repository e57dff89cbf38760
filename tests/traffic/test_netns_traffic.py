"""Real RoCEv2 packets between namespaces: wire bytes, recovery, collectives, bad input."""
from __future__ import annotations

import json
import os
import socket
import time
import zlib
from pathlib import Path

import pytest

from formats import roce
from formats.roce import Opcode
from tests.helpers.waiting import wait_for
from tests.traffic.netns_util import ROOT, run_ranks, star, udp_counters
from traffic.control import query_stats, send_control
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.errors import ControlError
from traffic.qp_types import QpConfig

pytestmark = pytest.mark.root


def _step_until(eps, cond, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "condition not reached in time"
        for ep in eps:
            ep.step(0.0005)


def _crcs(summary: dict, direction: str) -> list[tuple[int, int]]:
    return [(m["size"], m["crc32"]) for m in summary["messages"] if m["dir"] == direction]


def test_wire_bytes_match_formats_and_scapy(pair) -> None:
    h1, h2 = pair
    with h1.enter():
        a = Endpoint(EndpointConfig(ip=h1.ip))
        req = a.add_requester(QpConfig(qpn=0x11, peer_qpn=0x22, peer_ip=h2.ip, mtu=256))
    with h2.enter():
        b = Endpoint(EndpointConfig(ip=h2.ip))
        resp = b.add_responder(QpConfig(qpn=0x22, peer_qpn=0x11, peer_ip=h1.ip, mtu=256))
        cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        cap.bind((h2.ifname, 0))
        cap.setblocking(False)
    try:
        data = bytes(range(256)) * 3 + b"tail"
        req.post_write(data, now=a.now())
        _step_until([a, b], lambda: req.idle)
        frames = []
        while True:
            try:
                frames.append(cap.recv(4096))
            except BlockingIOError:
                break
        data_frames = [f for f in frames if f[23] == 17 and f[36:38] == b"\x12\xb7"]
        assert len(data_frames) == 4  # FIRST, MIDDLE, MIDDLE, LAST
        ops = []
        for i, f in enumerate(data_frames):
            hdr, pkt = roce.parse_frame(f)
            assert roce.verify_icrc(hdr, f[42:])
            ops.append(pkt.bth.opcode)
            rebuilt = roce.build_frame(
                eth_src=h1.mac, eth_dst=h2.mac, src=h1.ip, dst=h2.ip, sport=req.sport, tos=2,
                opcode=pkt.bth.opcode, dest_qp=0x22, psn=i, payload=data[i * 256:(i + 1) * 256],
                reth=(pkt.reth.va, pkt.reth.r_key, len(data)) if pkt.reth else None,
                ack_req=pkt.bth.opcode == Opcode.WRITE_LAST, ttl=f[22])
            assert rebuilt == f[:len(rebuilt)]
            sp = roce.to_scapy(f[:len(rebuilt)])
            from scapy.contrib.roce import BTH

            assert sp[BTH].compute_icrc(None) == f[len(rebuilt) - 4:len(rebuilt)]
        assert ops == [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_MIDDLE,
                       Opcode.WRITE_LAST]
        assert resp.messages[0].crc32 == zlib.crc32(data)
        assert b.counters.bad_icrc == 0 and a.counters.bad_icrc == 0
        # ECN CE on data makes the responder send a CNP that the requester counts
        a._socks[0x11].setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 3)
        req.post_write(b"x" * 100, now=a.now())
        _step_until([a, b], lambda: req.idle and req.counters.cnps_rx >= 1)
        assert b.counters.cnps_tx >= 1
    finally:
        cap.close()
        a.close()
        b.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["gbn", "sr", "fec"])
@pytest.mark.parametrize("loss", ["0.03", "ge:0.01,0.3"])
def test_modes_deliver_everything_under_loss(pair, tmp_path: Path, mode: str, loss: str) -> None:
    h1, h2 = pair
    args = ["-s", "uniform:1K:24K", "-c", "25", "--qps", "2", "--rate", "150M", "--mode",
            mode, "--fec", "8,2", "--rto-min", "150ms", "--seed", "3"]
    tx, rx = run_ranks([h1, h2], "p2p", args, tmp_path, per_rank={1: ["--loss", loss]})
    kernel = udp_counters(h2)  # packets that arrived before rank 1 bound its socket, if any
    unbound = kernel["NoPorts"] + kernel["RcvbufErrors"]
    assert tx["finished"] and rx["finished"]
    assert sorted(_crcs(tx, "tx")) == sorted(_crcs(rx, "rx")) and len(_crcs(rx, "rx")) == 50
    reqs = tx["endpoint"]["requesters"].values()
    resps = rx["endpoint"]["responders"].values()
    retx = sum(r["retx_pkts"] for r in reqs)
    data_drops = rx["endpoint"]["endpoint"]["injected_data_drops"]
    repaired = sum(r["fec_repaired"] for r in resps)
    assert data_drops > 0
    assert rx["endpoint"]["endpoint"]["bad_icrc"] == 0
    why = (f"retx {retx}, injected {data_drops}, unbound {unbound}, timeouts "
           f"{sum(r['timeouts'] for r in reqs)}, late starts {tx['late_start_s']:.3f}/"
           f"{rx['late_start_s']:.3f} s")
    if mode == "sr":
        # every loss was injected by the emulation, or hit a socket not yet bound
        assert retx == data_drops + unbound, why
    elif mode == "gbn":
        assert retx >= data_drops and sum(r["naks_rx"] for r in reqs) >= 1, why
    else:
        assert repaired > 0 and retx < data_drops + unbound, why
        assert retx + repaired >= data_drops, why


@pytest.mark.bpf
@pytest.mark.slow
def test_selective_repeat_under_ebpf_ingress_loss(pair, tmp_path: Path) -> None:
    from ebpf.loss import LossEmulator

    h1, h2 = pair
    with LossEmulator(h2.ifname, netns=h2.name, udp_dport=4791) as loss:
        loss.set_bernoulli(0.03)
        args = ["-s", "16K", "-c", "20", "--rate", "150M", "--mode", "sr", "--rto-min",
                "150ms"]
        tx, rx = run_ranks([h1, h2], "p2p", args, tmp_path)
        dropped = loss.counters().dropped
    kernel = udp_counters(h2)
    unbound = kernel["NoPorts"] + kernel["RcvbufErrors"]
    assert sorted(_crcs(tx, "tx")) == sorted(_crcs(rx, "rx"))
    retx = sum(r["retx_pkts"] for r in tx["endpoint"]["requesters"].values())
    assert dropped > 0 and retx == dropped + unbound, (retx, dropped, unbound)


@pytest.mark.slow
def test_ring_allreduce_and_incast_on_a_bridge(tmp_path: Path) -> None:
    n = 4
    with star(n) as hosts:
        outs = run_ranks(hosts, "allreduce", ["-s", "64K", "-c", "2", "-q", "2",
                                              "--rate", "200M"], tmp_path)
        for o in outs:
            c = o["collective"]
            assert c["result_ok"] and c["iterations"] == 2 and c["qps"] == 2
            assert c["steps_per_iteration"] == 2 * (n - 1)
            assert c["steps_sent"] == c["steps_received"] == 2 * 2 * (n - 1)
            assert len(c["completion_s"]) == 2 and all(t > 0 for t in c["completion_s"])
        outs = run_ranks(hosts, "incast", ["-s", "8K", "-c", "10", "--rate", "100M"],
                         tmp_path)
        assert sorted(_crcs(outs[0], "rx")) == sorted(
            x for o in outs[1:] for x in _crcs(o, "tx"))


def test_malformed_and_unexpected_packets_are_counted_and_dropped(pair) -> None:
    h1, h2 = pair
    with h2.iproute() as ipr:  # a second address on h2's side for the wrong-peer case
        pass
    with h1.iproute() as ipr:
        idx = ipr.link_lookup(ifname=h1.ifname)[0]
        ipr.addr("add", index=idx, address="10.77.0.3", prefixlen=24)
    with h1.enter():
        a = Endpoint(EndpointConfig(ip=h1.ip))
        req = a.add_requester(QpConfig(qpn=5, peer_qpn=6, peer_ip=h2.ip, mtu=512))
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        raw.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_PMTUDISC_DO: ID 0, DF like a QP
        raw.bind((h1.ip, 0))
        other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        other.setsockopt(socket.IPPROTO_IP, 10, 2)
        other.bind(("10.77.0.3", 0))
    with h2.enter():
        b = Endpoint(EndpointConfig(ip=h2.ip))
        resp = b.add_responder(QpConfig(qpn=6, peer_qpn=5, peer_ip=h1.ip, mtu=512))
    try:
        sport = raw.getsockname()[1]

        def good(**kw) -> bytes:
            base = {"src": h1.ip, "dst": h2.ip, "sport": sport, "opcode": Opcode.WRITE_ONLY,
                    "dest_qp": 6, "psn": 0, "reth": (0, 1, 4), "payload": b"abcd"}
            base.update(kw)
            return roce.build_udp_payload(**base)

        bad_icrc = bytearray(good())
        bad_icrc[-1] ^= 0xFF
        sends = [
            (raw, bytes(bad_icrc)),  # bad ICRC
            (raw, good(dest_qp=99)),  # unknown QP
            (raw, good(opcode=0x0C, reth=None)),  # RDMA READ request: not emulated
            (raw, good(psn=0x400000)),  # PSN far outside the window
            (raw, good()[:10]),  # truncated: shorter than BTH + ICRC
            (raw, good(opcode=Opcode.WRITE_FIRST, reth=(0, 1, 9000))[:20]
             + b"\0\0\0\0"),  # truncated RETH (ICRC slot present but wrong)
            (other, roce.build_udp_payload(src="10.77.0.3", dst=h2.ip,
                                           sport=other.getsockname()[1],
                                           opcode=Opcode.WRITE_ONLY, dest_qp=6, psn=0,
                                           reth=(0, 1, 4), payload=b"evil")),  # wrong peer
        ]
        for s, buf in sends:
            s.sendto(buf, (h2.ip, 4791))
        _step_until([b], lambda: b.counters.rx_pkts >= len(sends))
        c = b.counters
        assert c.bad_icrc == 2  # the flipped ICRC and the cut RETH packet
        assert c.unknown_qp == 1 and c.truncated == 1 and c.wrong_peer == 1
        assert c.unexpected_opcode == 1
        assert resp.counters.psn_out_of_window == 1
        assert resp.counters.msgs_done == 0
        # the QP is undisturbed: a real transfer still completes intact
        payload = os.urandom(5000)
        req.post_write(payload, now=a.now())
        _step_until([a, b], lambda: req.idle)
        assert [m.crc32 for m in resp.messages] == [zlib.crc32(payload)]
    finally:
        raw.close()
        other.close()
        a.close()
        b.close()


def test_rate_and_fec_feedback_through_the_control_socket(pair, tmp_path: Path) -> None:
    h1, h2 = pair
    ctl = str(tmp_path / "ctl.sock")
    with h1.enter():
        a = Endpoint(EndpointConfig(ip=h1.ip, control_path=ctl))
        req = a.add_requester(QpConfig(qpn=7, peer_qpn=8, peer_ip=h2.ip, rate_bps=20e6,
                                       mode="fec"))
    with h2.enter():
        b = Endpoint(EndpointConfig(ip=h2.ip, delay_s=0.010))  # RTT >= 10 ms
        b.add_responder(QpConfig(qpn=8, peer_qpn=7, peer_ip=h1.ip, mode="fec"))
    try:
        for _ in range(40):
            req.post_write(os.urandom(50_000), now=a.now())
        _step_until([a, b], lambda: req.srtt_s is not None)
        send_control(ctl, {"qp": 7, "rate_bps": 200e6}, {"qp": "*", "fec_k": 4, "fec_m": 2},
                     {"qp": 12345, "rate_bps": 1e6})
        # the datagram is queued when send_control returns: the very next loop
        # iteration applies it, before it sends anything more (not a wall-clock bound,
        # which a descheduled test process would miss on a loaded host)
        a.step(0.0)
        applied_at, rate = req.rate_log[-1]
        assert rate == 200e6 and req.cfg.rate_bps == 200e6
        assert (req.cfg.fec_k, req.cfg.fec_m) == (4, 2)
        assert a.counters.control_errors == 1  # QP 12345 is not ours
        # the series shows the new rate
        _step_until([a, b], lambda: a.now() > applied_at + 0.1)
        a._sample(a.now())
        assert a.series[7][-1][1] == 200e6
        stats = a.stats(compact=True)
        assert json.loads(json.dumps(stats))["requesters"]["7"]["rate_bps"] == 200e6
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_cli_rate_feedback_speeds_up_a_running_sender(pair, tmp_path: Path) -> None:
    import subprocess
    import sys

    h1, h2 = pair
    ctl = tmp_path / "h1.sock"
    hosts = f"{h1.ip},{h2.ip}"
    start_at = time.time() + 3.0  # both ranks start Python first: seconds on a loaded machine
    common = ["--hosts", hosts, "-s", "64K", "-c", "60", "--inflight", "60", "--rate", "10M",
              "--delay", "5ms", "--start-at", f"{start_at:.3f}", "--timeout", "30"]
    rx = h2.popen([sys.executable, "-m", "traffic", "p2p", *common, "--rank", "1", "-o",
                   str(tmp_path / "r1.json")], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL, cwd=ROOT)
    tx = h1.popen([sys.executable, "-m", "traffic", "p2p", *common, "--rank", "0", "-o",
                   str(tmp_path / "r0.json"), "--control", str(ctl)],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    # the sender binds its control socket before its start time; under load it may not
    # have started by then, so wait for the socket rather than for the clock alone
    assert wait_for(ctl.exists, timeout_s=30), "the sender never opened its control socket"
    qpn = (0 << 16) | (1 << 8) | 0

    def sent_bytes() -> int:
        try:
            st = query_stats(str(ctl), timeout_s=1.0)
        except ControlError:   # busy or gone: ask again
            return 0
        return int(st["requesters"].get(str(qpn), {}).get("tx_bytes", 0))

    # the change must come after a stretch at 10 Mbit/s: wait for what the sender did
    # (about 0.4 s of traffic), not for the clock, since a loaded machine starts it late
    assert wait_for(lambda: sent_bytes() >= 500_000, timeout_s=40), "the sender never sent at 10M"
    send_control(str(ctl), {"qp": qpn, "rate_bps": 100e6})
    assert tx.wait(timeout=60) == 0 and rx.wait(timeout=60) == 0
    s = json.loads((tmp_path / "r0.json").read_text())
    q = s["endpoint"]["requesters"][str(qpn)]
    assert q["rate_changes"][-1][1] == 100e6 and q["rate_bps"] == 100e6
    t_change = q["rate_changes"][-1][0]
    series = s["endpoint"]["series"][str(qpn)]  # t, rate_bps, tx_bytes, ...
    # strictly before the change's time as the series stamps it (6 decimals): a row with
    # the change's own time was sampled after it (an endpoint step serves its control
    # socket, then samples, at one clock reading; the CI saw it once in 2,500 tests)
    before = [r for r in series if s["start_s"] + 0.05 <= r[0] < round(t_change, 6)]
    after = [r for r in series if r[0] > t_change + 0.05]
    assert before and len(after) >= 2 and before[-1][1] == 10e6 and after[-1][1] == 100e6
    rate_before = (before[-1][2] - before[0][2]) / max(1e-9, before[-1][0] - before[0][0])
    rate_after = (after[-1][2] - after[0][2]) / max(1e-9, after[-1][0] - after[0][0])
    assert rate_after > 3 * rate_before


def test_receiver_stays_until_a_lost_final_ack_is_answered(pair, tmp_path: Path) -> None:
    """The sender loses most ACKs (its own ingress drops 60 % of every packet), so the ACK
    of its last message is likely lost after the receiver has everything: the receiver
    must keep answering the retransmissions (one RTO later, up to rto_max) instead of
    leaving, or the sender never finishes."""
    args = ["-s", "1K", "-c", "12", "--mode", "sr", "--rto-min", "300ms", "--seed", "5"]
    tx, rx = run_ranks(list(pair), "p2p", args, tmp_path, timeout=40.0,
                       per_rank={0: ["--loss", "0.6", "--loss-scope", "all"]})
    assert rx["finished"], rx["endpoint"]["endpoint"]
    assert tx["endpoint"]["endpoint"]["injected_drops"] > 0
    assert tx["finished"], tx["endpoint"]["requesters"]
    assert sorted(_crcs(tx, "tx")) == sorted(_crcs(rx, "rx")) and len(_crcs(rx, "rx")) == 12
