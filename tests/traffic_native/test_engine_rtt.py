"""The engine's RTT samples: from the first transmission of the packet an ACK newly
acknowledges to the ACK's arrival, never from a retransmission (Karn) nor from an
ACK that acknowledges nothing new.

Step mode (an injected clock, exact times): a scripted network with a known one-way
delay each way (plus jitter that reorders), data and ACK losses, duplicate ACKs and
receiver-side coalescing.  An oracle written here from the wire alone (which PSN left
when, which were sent twice, what each ACK and SACK covers) says what every ACK's
sample must be; the engine's ``last_rtt_s`` / ``rtt_samples`` must agree after every
ACK, and no sample may be shorter than the path's two delays.  On real sockets, a
receive delay held by the requester's engine (a known extra delay on the ACK path)
must show in every sample.
"""
from __future__ import annotations

import random
import time

import pytest

from formats import roce
from traffic.endpoint import EndpointConfig
from traffic.native_endpoint import NativeEndpoint, StepEngine, engine_available
from traffic.qp_types import QpConfig, Reliability

pytestmark = pytest.mark.skipif(not engine_available(),
                                reason="native engine not built (make -C traffic/native)")

A, B = "10.9.1.1", "10.9.1.2"
SA, SB = 50011, 50012
QPN = 0x020304
TICK = 1e-4                # the simulation's clock step
FWD, BACK = 3e-3, 2e-3     # one-way delays: data A -> B, ACKs B -> A
JITTER = (0.0, 0.0, 5e-4, 1e-3)


def _oracle_sample(now: float, pkt: roce.RocePacket, seq_of, acked: set[int],
                   first_tx: dict[int, float], resent: set[int]) -> float | None:
    """The sample this ACK must give (None: none), updating ``acked``."""
    assert pkt.aeth is not None
    top = seq_of(pkt.bth.psn) + (0 if pkt.aeth.syndrome & 0x60 == 0x60 else 1)
    newly = [s for s in range(top) if s not in acked and s in first_tx]
    if pkt.sack is not None:
        newly += [seq_of(p) for p in pkt.sack.received_psns()
                  if seq_of(p) not in acked and seq_of(p) in first_tx]
    acked.update(newly)
    fresh = [first_tx[s] for s in newly if s not in resent]
    return now - max(fresh) if fresh else None


@pytest.mark.parametrize("mode", [Reliability.SR, Reliability.GBN])
@pytest.mark.parametrize("seed", range(6))
def test_every_rtt_sample_is_from_the_first_transmission(mode: Reliability, seed: int) -> None:
    rng = random.Random(seed)
    start = rng.choice([0, 0xFFFFFF - 7, 4242])
    kw = {"mode": mode, "mtu": 1024, "rate_bps": 1e7, "window_pkts": 32,
          "rto_min_s": 0.02, "rto_initial_s": 0.05}
    qa = QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B, **kw)
    qb = QpConfig(qpn=QPN + 1, peer_qpn=QPN, peer_ip=A, **kw)
    na, nb = StepEngine(A), StepEngine(B)
    na.add_qp(qa, requester=True, sport=SA, start_psn=start, burst_s=0.0,
              min_burst_bytes=1100)
    nb.add_qp(qb, requester=False, sport=SB, start_psn=start)

    def seq_of(psn: int) -> int:
        return roce.psn_diff(psn, start)

    try:
        for n in (5000, 20000, 1, 3000):
            na.post_write(QPN, rng.randbytes(n))
        first_tx: dict[int, float] = {}
        resent: set[int] = set()
        acked: set[int] = set()
        to_b: list[tuple[float, bytes]] = []
        to_a: list[tuple[float, bytes]] = []
        samples = checked = 0
        for k in range(20000):
            t = k * TICK
            na.step(t)
            for _, _, _, p in na.output():
                s = seq_of(roce.parse_udp_payload(p).bth.psn)
                if s in first_tx:
                    resent.add(s)
                else:
                    first_tx[s] = t
                lose = (s == 3 and s not in resent) or rng.random() < 0.05  # 4th: once
                if not lose:
                    to_b.append((t + FWD + rng.choice(JITTER), p))
            due = [p for at, p in to_b if at <= t]
            to_b = [(at, p) for at, p in to_b if at > t]
            # the responder coalesces: sometimes it reads several before it ACKs
            if due and rng.random() < 0.3:
                to_b += [(t + TICK, p) for p in due[1:]]
                due = due[:1]
            for p in due:
                nb.inject(A, SA, p, t)
            nb.step(t)
            for _, _, _, ack in nb.output():
                if rng.random() >= 0.05:  # ACK loss
                    to_a.append((t + BACK + rng.choice(JITTER), ack))
                    if rng.random() < 0.05:  # a duplicate, late
                        to_a.append((t + BACK + 3e-3, ack))
            arrived = sorted((x for x in to_a if x[0] <= t), key=lambda x: x[0])
            to_a = [x for x in to_a if x[0] > t]
            for _, ack in arrived:
                before = na.state(QPN).rtt_samples
                na.inject(B, SB, ack, t)
                st = na.state(QPN)
                want = _oracle_sample(t, roce.parse_udp_payload(ack), seq_of, acked,
                                      first_tx, resent)
                if want is None:
                    assert st.rtt_samples == before, f"seed {seed} t={t:.4f}: a sample " \
                        f"({st.last_rtt_s}) from an ACK that newly acknowledges no " \
                        "never-retransmitted packet"
                else:
                    assert st.rtt_samples == before + 1
                    assert st.last_rtt_s == pytest.approx(want, abs=1e-12), (
                        f"seed {seed} t={t:.4f}: sample {st.last_rtt_s} != {want}")
                    assert st.last_rtt_s >= FWD + BACK - 1e-12
                    samples += 1
                checked += 1
            if na.state(QPN).idle and not to_b and not to_a:
                break
        st = na.state(QPN)
        assert st.idle, f"seed {seed}: transfer did not finish"
        assert samples >= 10 and checked > samples or mode is Reliability.GBN
        assert st.min_rtt_s >= FWD + BACK - 1e-12
        assert st.min_rtt_s <= FWD + BACK + 2 * max(JITTER) + TICK + 1e-9
        assert resent, f"seed {seed}: nothing was retransmitted (the test lost nothing)"
    finally:
        na.close()
        nb.close()


def test_samples_on_real_sockets_include_a_known_receive_delay() -> None:
    """The requester's engine holds every ACK 20 ms (its receive delay line): every
    sample is at least that, and the smallest is that plus the loopback's round trip."""
    net = f"127.{random.randint(20, 219)}.{random.randint(1, 250)}"
    delay = 0.02
    with NativeEndpoint(EndpointConfig(ip=f"{net}.1", delay_s=delay)) as tx, \
            NativeEndpoint(EndpointConfig(ip=f"{net}.2")) as rx:
        q = {"rate_bps": 1e8, "rto_min_s": 0.2}
        req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=f"{net}.2", **q))
        rx.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=f"{net}.1", **q))
        for _ in range(20):
            req.post_write(b"z" * 3000)
        end = time.monotonic() + 60
        while not req.idle and time.monotonic() < end:
            tx.step(0.001)
            rx.step(0.001)
        assert req.idle
        req._refresh()
        st = req._state
        assert st.rtt_samples >= 1
        assert st.min_rtt_s >= delay
        assert st.last_rtt_s >= delay
