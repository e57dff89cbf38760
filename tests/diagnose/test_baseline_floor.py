"""A pair's baseline is kept near the other pairs': in a ring every pair moves the same
chunk at the same paced rate, so a pair whose first transfers caught an idle moment of
the switches (a Python switch on a loaded machine: 0.3-2.7 s without any fault) does not
read its later, ordinary transfers as a slowdown; a real slowdown still counts."""
from __future__ import annotations

from controller.diagnose.transfers import analyse
from traffic.collog.records import CollRecord

T0 = 1_700_000_000.0


def _ring(durations: dict[tuple[int, int], list[float]], gap: float = 0.5) -> list[CollRecord]:
    recs = []
    for (a, b), ds in durations.items():
        for i, d in enumerate(ds):
            start = T0 + i * gap
            recs += [CollRecord(rank=a, comm="c", op="allreduce", seq=i, dir="send", peer=b,
                                qpn=q, start=start, end=start + d) for q in (1, 2)]  # 2 QPs
    return recs


def _others(n: int) -> dict[tuple[int, int], list[float]]:
    wave = [1.0, 1.3, 0.8, 1.1, 1.2, 0.9]
    return {(1, 2): [wave[i % 6] for i in range(n)], (2, 3): [wave[(i + 2) % 6] for i in range(n)],
            (3, 0): [wave[(i + 4) % 6] for i in range(n)]}


def test_a_pair_with_a_lucky_fast_start_is_not_slow() -> None:
    # pair 0->1's first six transfers took 0.34 s, the others ~1 s; then it takes ~1 s too
    lucky = [0.34] * 6 + [1.0, 1.2, 0.9, 1.1, 1.3, 1.0, 0.9, 1.2, 1.1, 1.0]
    v = analyse(_ring({(0, 1): lucky, **_others(len(lucky))}), T0 + 20)
    assert v.bad_pairs == set()


def test_a_real_slowdown_of_a_pair_is_still_slow() -> None:
    slowed = [1.0, 1.1, 0.9, 1.0, 1.2, 1.0] + [3.5] * 10
    v = analyse(_ring({(0, 1): slowed, **_others(len(slowed))}), T0 + 30)
    assert v.bad_pairs == {(0, 1)}
