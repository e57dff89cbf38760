"""Authenticated channels over real UDP sockets on loopback: the collector admits only
sealed agent batches and reports from the configured switches; the feedback sender
seals feedback and takes only sealed confirmations; keyless processes refuse to
listen beyond loopback / the test bed's network."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from common.auth import KeyFile, KeyRing, Signer, Verifier, check_exposure
from common.auth.exposure import ExposureError
from controller.cc.sender import FeedbackSender
from controller.int import Collector, CollectorConfig
from controller.int.synth import Hop, build_hpcc_report
from ebpf.feedback import decode_feedback_datagram, encode_confirmations
from formats.agent_batch import encode_batch
from formats.auth import CONTROLLER_SENDER_ID, FrameKind
from formats.int_md import HOST_RECORD_DTYPE
from tests.helpers.waiting import wait_or_fail

ROOT = Path(__file__).resolve().parents[2]
KEYS = KeyFile.from_ring(KeyRing(keys={1: b"k" * 32}, sign_key_id=1,
                                 senders=frozenset({CONTROLLER_SENDER_ID, 3, 4})))
OTHER = KeyFile.from_ring(KeyRing(keys={1: b"x" * 32}, sign_key_id=1))


def _records(n: int) -> np.ndarray:
    r = np.zeros(n, HOST_RECORD_DTYPE)
    r["src_ip"], r["dst_ip"], r["orig_dport"], r["dest_qp"] = 0x0A000001, 0x0A000002, 4791, 7
    r["psn"] = np.arange(n)
    return r


def _report(seq: int) -> bytes:
    hops = [Hop(node_id=1, egress_port=1, egress_ts_us=seq, tx_bytes=1000 * seq,
                queue_bytes=10, line_rate_mbps=40000)]
    return build_hpcc_report(node_id=7, seq=seq, hops=hops, dest_qp=1)


def test_collector_admits_sealed_batches_and_switch_reports_only() -> None:
    genuine = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    genuine.bind(("127.0.0.1", 0))
    rogue.bind(("127.0.0.1", 0))
    cfg = CollectorConfig(report_port=0, agent_port=0, keys=KEYS,
                          report_sources=frozenset({genuine.getsockname()}))
    try:
        with Collector(cfg) as c:
            agent = Signer(KEYS, sender_id=3, kind=FrameKind.HOST_BATCH)
            for i in range(20):   # genuine: sealed batches, reports from the switch source
                genuine.sendto(agent.seal(encode_batch(_records(10), agent_id=3, batch_seq=i)),
                               c.agent_address)
                genuine.sendto(_report(i), c.report_address)
            plain = encode_batch(_records(10), agent_id=3, batch_seq=99)
            rogue.sendto(plain, c.agent_address)                                  # no frame
            rogue.sendto(Signer(OTHER, sender_id=3, kind=1).seal(plain), c.agent_address)
            rogue.sendto(agent.seal(encode_batch(_records(1), agent_id=4, batch_seq=0)),
                         c.agent_address)                                         # speaks for 4
            for i in range(20):                                                   # forged reports
                rogue.sendto(_report(1000 + i), c.report_address)
            wait_or_fail(lambda: c.stats().host_records >= 200 and c.stats().reports >= 20
                  and sum(c.stats().rejected.values()) >= 23)
            time.sleep(0.1)
            st = c.stats()
            assert st.host_records == 200 and st.reports == 20
            assert st.rejected == {"report_source": 20, "agent_unauthenticated": 1,
                                   "agent_bad_mac": 1, "agent_sender_mismatch": 1}
            assert [(s.received, s.lost) for s in st.switches] == [(20, 0)]  # no forged gaps
    finally:
        genuine.close()
        rogue.close()


def test_feedback_sealed_and_confirmations_verified() -> None:
    agent_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent_sock.bind(("127.0.0.1", 0))
    agent_sock.settimeout(5)
    sender = FeedbackSender(n_flows=4, signer=Signer(KEYS, sender_id=CONTROLLER_SENDER_ID,
                                                     kind=FrameKind.FEEDBACK),
                            verifier=Verifier(KEYS, kinds=(FrameKind.CONFIRM,)))
    agent_verify = Verifier(KEYS, kinds=(FrameKind.FEEDBACK,),
                            only_senders=frozenset({CONTROLLER_SENDER_ID}))
    try:
        sender.bind_flow(0, agent=agent_sock.getsockname(), flow_id=0x31)
        assert sender.send([0], [5e9]) == 1
        data, ctl_addr = agent_sock.recvfrom(65535)
        assert decode_feedback_datagram(data) is None or len(data) % 32 != 0
        opened = agent_verify.open(data)
        assert opened is not None
        rec = decode_feedback_datagram(opened.payload)
        assert rec is not None and int(rec[0]["flow_id"]) == 0x31
        assert agent_verify.open(data) is None and agent_verify.stats.rejected == {"replay": 1}
        # a keyless forger on another agent's behalf: refused by the agent
        assert agent_verify.open(Signer(OTHER, sender_id=CONTROLLER_SENDER_ID,
                                        kind=2).seal(opened.payload)) is None
        # another key holder (agent 4) cannot send feedback either
        assert agent_verify.open(Signer(KEYS, sender_id=4, kind=2).seal(opened.payload)) is None
        assert agent_verify.stats.rejected == {"replay": 1, "bad_mac": 1, "unknown_sender": 1}
        conf = encode_confirmations([(0x31, int(rec[0]["seq"]), int(rec[0]["decided_ns"]),
                                      10, 77, 0)]).tobytes()
        agent_sock.sendto(conf, ctl_addr)                                   # unsealed
        agent_sock.sendto(Signer(KEYS, sender_id=3, kind=3).seal(conf), ctl_addr)
        got = sender.receive_confirmations()
        for _ in range(50):
            if len(got):
                break
            time.sleep(0.02)
            got = sender.receive_confirmations()
        assert len(got) == 1 and int(got.applied_psn[0]) == 77
        assert sender.verifier is not None
        assert sender.verifier.stats.rejected == {"unauthenticated": 1}
    finally:
        sender.close()
        agent_sock.close()


def test_exposure_policy() -> None:
    assert check_exposure("x", "127.0.0.1", keyed=False, insecure=False) is None
    assert check_exposure("x", "10.254.3.2", keyed=False, insecure=False) is None
    assert check_exposure("x", "0.0.0.0", keyed=True, insecure=False) is None
    with pytest.raises(ExposureError, match="--insecure"):
        check_exposure("x", "0.0.0.0", keyed=False, insecure=False)
    assert "--insecure" in (check_exposure("x", "10.0.0.1", keyed=False, insecure=True) or "")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", *args], check=False, capture_output=True,
                          text=True, timeout=60, env=env, cwd=ROOT)


def test_keyless_cli_refuses_public_addresses(tmp_path: Path) -> None:
    r = _cli("ebpf.agent", "--iface", "lo", "--feedback-port", "40000", "1", "1")
    assert r.returncode == 2 and "without a key" in r.stderr and "--insecure" in r.stderr
    topo = ROOT / "mininet_topos" / "topofiles" / "dumbbell.yaml"
    r = _cli("controller", "run", "--topology", str(topo), "--listen", "0.0.0.0", "--once",
             "--out", str(tmp_path))
    assert r.returncode == 2 and "without a key" in r.stderr, r.stderr
    bad = tmp_path / "keys.yaml"
    bad.write_text("keys: [{id: 1, secret: '" + "00" * 16 + "'}]\n")
    bad.chmod(0o644)
    r = _cli("ebpf.agent", "--iface", "lo", "--key-file", str(bad), "1", "1")
    assert r.returncode == 2 and "chmod 600" in r.stderr
