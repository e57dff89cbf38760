"""Traffic manager, replication and the CPU port of a running switch process, driven
over P4Runtime: queues build when a port is paced below the offered load, a clone
reaches the mirror port, multicast replicates, packet-in/out make a round trip."""
from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2 as P
from switchd_helpers import P4RtClient, chain, collect, raw_socket, udp_frame, udp_socket

pytestmark = [pytest.mark.root]
PROGRAM = Path(__file__).resolve().parent / "switchd_test.p4"
PROBE = struct.Struct("!IIIII")


def _pre(**kw) -> P.Update:
    return P.Update(type=P.Update.INSERT, entity=P.Entity(
        packet_replication_engine_entry=P.PacketReplicationEngineEntry(**kw)))


def test_queue_builds_when_rate_is_below_offered_load(tmp_path) -> None:
    """Port 2 paced at 2 Mbit/s with 24 packets of room; 60 probes of ~1 kB sent at once."""
    with chain(tmp_path, 1) as c:
        s = c.switches[0]
        s.start(PROGRAM, "--queue-rate", "2:2", "--queue-depth", "2:24")
        rx = udp_socket(c.h2, 5555)
        tx = udp_socket(c.h1)
        try:
            for i in range(60):
                tx.sendto(struct.pack("!I", i) + bytes(PROBE.size - 4) + b"x" * 1000, (c.h2.ip, 5555))
            got = []
            rx.settimeout(2)
            try:
                while True:
                    got.append(PROBE.unpack_from(rx.recv(2048)))
            except TimeoutError:
                pass
        finally:
            rx.close()
            tx.close()
        enq = [g[0] for g in got]
        deq = [g[1] for g in got]
        delta = [g[2] for g in got]
        assert 24 <= len(got) < 60, len(got)             # the rest were tail-dropped
        assert max(enq) >= 12 and max(enq) <= 23, enq    # never more than depth - 1 ahead
        assert max(deq) >= 10
        assert max(delta) >= 10 * 4000                    # waited >= 10 slots of ~4.1 ms
        # enq_timestamp + deq_timedelta <= egress timestamp (same µs clock)
        assert all(g[3] + g[2] <= g[4] + 1 for g in got)
        time.sleep(1.2)                                   # stats file refreshed each second
        st = s.port_stats(2)
        assert st["tail_drops"] == 60 - len(got)
        assert st["queue_high_water"] == 24 and st["queue_rate_bps"] == 2e6


def test_clone_multicast_and_packet_io(tmp_path) -> None:
    with chain(tmp_path, 1, mirror_ports=2) as c:
        s = c.switches[0]
        s.start()
        cl = P4RtClient(s.grpc_addr, 1)
        try:
            cl.set_pipeline(PROGRAM)
            cl.write(_pre(clone_session_entry=P.CloneSessionEntry(
                session_id=100, replicas=[P.Replica(egress_port=3, instance=0)])))
            cl.write(_pre(multicast_group_entry=P.MulticastGroupEntry(
                multicast_group_id=1, replicas=[P.Replica(egress_port=p, instance=p) for p in (2, 3, 4)])))
            m3, m4 = c.extra
            h2_raw = raw_socket(c.h2, c.h2.ifname)
            m3_raw = raw_socket(m3, m3.ifname)
            m4_raw = raw_socket(m4, m4.ifname)
            tx = udp_socket(c.h1)

            def ours(tag: bytes):
                return lambda f: f.endswith(tag)

            # clone: the original reaches h2, the copy reaches the mirror port 3 only
            tx.sendto(b"clone-me", (c.h2.ip, 7000))
            assert len(collect(h2_raw, 0.5, ours(b"clone-me"))) == 1
            assert len(collect(m3_raw, 0.2, ours(b"clone-me"))) == 1
            assert collect(m4_raw, 0.2, ours(b"clone-me")) == []
            # the session moved to port 4 with packet_length_bytes: the first 40 bytes only
            cl.write(P.Update(type=P.Update.MODIFY, entity=P.Entity(
                packet_replication_engine_entry=P.PacketReplicationEngineEntry(
                    clone_session_entry=P.CloneSessionEntry(
                        session_id=100, replicas=[P.Replica(egress_port=4, instance=0)],
                        packet_length_bytes=40)))))
            tx.sendto(b"clone-me-short", (c.h2.ip, 7000))
            full = collect(h2_raw, 0.5, ours(b"clone-me-short"))
            assert len(full) == 1
            short = collect(m4_raw, 0.5, lambda f: f[:34] == full[0][:34])
            assert short == [full[0][:40]]
            # multicast: one copy on each of ports 2, 3, 4
            tx.sendto(b"flood-me", (c.h2.ip, 6000))
            for sock in (h2_raw, m3_raw, m4_raw):
                assert len(collect(sock, 0.5, ours(b"flood-me"))) == 1
            # packet-in: UDP 8000 goes to the controller with its ingress port
            tx.sendto(b"to-controller", (c.h2.ip, 8000))
            msg = cl.stream_in.get(timeout=5)
            assert msg.HasField("packet"), msg
            assert msg.packet.payload.endswith(b"to-controller")
            assert next((m.metadata_id, m.value) for m in msg.packet.metadata) == (1, b"\x01")
            # digest: configured, then one learn_t list per datagram to UDP 9000
            dg = next(d for d in cl.p4info.digests if d.preamble.name == "learn_t")
            cl.write(P.Update(type=P.Update.INSERT, entity=P.Entity(digest_entry=P.DigestEntry(
                digest_id=dg.preamble.id, config=P.DigestEntry.Config(max_list_size=1)))))
            tx.sendto(b"learn-me", (c.h2.ip, 9000))
            msg = cl.stream_in.get(timeout=5)
            assert msg.HasField("digest"), msg
            assert msg.digest.digest_id == dg.preamble.id and len(msg.digest.data) == 1
            members = msg.digest.data[0].struct.members
            assert members[0].bitstring == bytes.fromhex(c.h1.mac.replace(":", "")).lstrip(b"\0")
            assert members[1].bitstring == b"\x01"
            # packet-out: the controller's frame leaves on the port it names
            frame = udp_frame(c.h1, c.h2, 9999, b"from-controller")
            cl.packet_out(frame, egress_port=2)
            got = collect(h2_raw, 1.0, ours(b"from-controller"))
            assert got == [frame]
            tx.close()
            for sock in (h2_raw, m3_raw, m4_raw):
                sock.close()
        finally:
            cl.close()
        time.sleep(1.2)
        st = s.stats()
        assert st["packet_ins"] == 1 and st["pipeline_errors"] == 0
