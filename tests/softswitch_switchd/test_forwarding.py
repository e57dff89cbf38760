"""Hosts talk through one and through three switch processes programmed over P4Runtime."""
from __future__ import annotations

import pytest
from switchd_helpers import IPV4_FORWARD, P4RtClient, chain, ipv4_routes, udp_socket

pytestmark = [pytest.mark.root]


def _exchange(c, rounds: int = 20) -> None:
    """UDP both ways: every datagram arrives intact."""
    a, b = udp_socket(c.h1, 40001), udp_socket(c.h2, 40002)
    try:
        for i in range(rounds):
            msg = f"ping {i} ".encode() * 50
            a.sendto(msg, (c.h2.ip, 40002))
            data, src = b.recvfrom(65535)
            assert (data, src) == (msg, (c.h1.ip, 40001))
            b.sendto(data[::-1], src)
            assert a.recvfrom(65535)[0] == msg[::-1]
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("n", [1, 3], ids=["one-switch", "chain-of-three"])
def test_ping_and_udp_through_switches(tmp_path, n: int) -> None:
    with chain(tmp_path, n) as c:
        clients = []
        try:
            for i, s in enumerate(c.switches):
                s.start(device_id=i + 1)
            for i, s in enumerate(c.switches):
                cl = P4RtClient(s.grpc_addr, i + 1)
                clients.append(cl)
                cl.set_pipeline(IPV4_FORWARD)
                ipv4_routes(cl, c.h1.mac, c.h2.mac)
            res = c.h1.run(["ping", "-c", "3", "-i", "0.2", "-W", "3", c.h2.ip], check=False)
            assert res.returncode == 0, res.stdout + res.stderr
            assert f"ttl={64 - n}" in res.stdout        # each switch decremented the TTL
            _exchange(c)
        finally:
            for cl in clients:
                cl.close()
        for s in c.switches:
            s.proc.terminate()
            assert s.proc.wait(10) == 0, s.log()
            st = s.stats()
            assert st["pipeline_errors"] == 0
            assert st["packets_in"] >= 46 and st["pipeline_drops"] == 0, st


def test_tcp_with_segmentation_offload_on(tmp_path) -> None:
    """veths keep TSO on: the switch cuts the senders' large TCP frames into segments."""
    import hashlib
    import socket
    import threading

    data = bytes(range(256)) * 4096 * 2          # 2 MiB
    with chain(tmp_path, 1) as c:
        s = c.switches[0]
        s.start()
        cl = P4RtClient(s.grpc_addr, 1)
        try:
            cl.set_pipeline(IPV4_FORWARD)
            ipv4_routes(cl, c.h1.mac, c.h2.mac)
        finally:
            cl.close()
        with c.h2.enter():
            srv = socket.socket()
        srv.bind((c.h2.ip, 45000))
        srv.listen(1)
        srv.settimeout(30)
        got = hashlib.sha256()
        n = [0]

        def receive() -> None:
            conn, _ = srv.accept()
            conn.settimeout(30)
            with conn:
                while chunk := conn.recv(1 << 16):
                    got.update(chunk)
                    n[0] += len(chunk)

        t = threading.Thread(target=receive)
        t.start()
        with c.h1.enter():
            cli = socket.socket()
        cli.settimeout(30)
        cli.connect((c.h2.ip, 45000))
        cli.sendall(data)
        cli.close()
        t.join(60)
        srv.close()
        assert n[0] == len(data) and got.digest() == hashlib.sha256(data).digest()
        s.proc.terminate()
        assert s.proc.wait(10) == 0
        st = s.stats()
        assert all(p["rx_dropped"] == 0 for p in st["ports"]), st
        assert st["ports"][0]["rx_gso_frames"] > 0                     # TSO frames arrived ...
        assert st["ports"][0]["rx_packets"] >= len(data) // 1448     # ... and left as segments


def test_jumbo_frames_and_reconciled_pipeline(tmp_path) -> None:
    """9000-byte MTU end to end; RECONCILE_AND_COMMIT keeps the routes, so traffic flows
    on without the controller writing them again."""
    from p4.v1 import p4runtime_pb2 as P
    with chain(tmp_path, 1, mtu=9000) as c:
        s = c.switches[0]
        s.start()
        cl = P4RtClient(s.grpc_addr, 1)
        try:
            cl.set_pipeline(IPV4_FORWARD)
            ipv4_routes(cl, c.h1.mac, c.h2.mac)
            a, b = udp_socket(c.h1, 40001), udp_socket(c.h2, 40002)
            try:
                big = bytes(range(256)) * 34 + b"end"              # 8707 bytes: one 8735-byte frame
                a.sendto(big, (c.h2.ip, 40002))
                assert b.recv(65535) == big
                cl.set_pipeline(IPV4_FORWARD, P.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
                a.sendto(b"after reconcile", (c.h2.ip, 40002))
                assert b.recv(65535) == b"after reconcile"
            finally:
                a.close()
                b.close()
        finally:
            cl.close()
        s.proc.terminate()
        assert s.proc.wait(10) == 0
        st = s.stats()
        assert st["ports"][1]["tx_bytes"] >= 8735 and st["ports"][0]["rx_dropped"] == 0
