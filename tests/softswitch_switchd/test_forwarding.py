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
