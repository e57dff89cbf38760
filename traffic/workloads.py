"""Workload plans: who sends what to whom, derived identically by every rank.

Why plans are data: each host runs its own process, and all of them are started with
the same arguments except ``--rank``; a plan computed from those arguments tells every
rank its requester QPs (peer, messages) and its responder QPs (peer, expected message
count), with QP numbers that both ends derive without a handshake: the connection from
rank ``s`` to rank ``d`` on channel ``c`` uses QP number ``s << 16 | d << 8 | c`` at
*both* ends.  That is unique on every host (a host is ``s`` of its requesters and ``d``
of its responders, and ``s != d``), and it makes the destination QP that the network
sees in data packets (INT records, loss maps) equal to the sender's local QP number,
which is what rate and FEC feedback must name.
"""
from __future__ import annotations

import argparse
import itertools
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from traffic.errors import ConfigError

__all__ = [
    "MAX_CHANNELS",
    "MAX_RANKS",
    "FlowSpec",
    "Pattern",
    "RankPlan",
    "SizeDist",
    "connection_qpn",
    "make_plan",
    "parse_size",
    "parse_size_dist",
]

MAX_RANKS = 256
MAX_CHANNELS = 256
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30}


class Pattern(str, Enum):
    P2P = "p2p"
    INCAST = "incast"
    ALLTOALL = "alltoall"
    ALLREDUCE = "allreduce"
    KVCACHE = "kvcache"


def connection_qpn(src_rank: int, dst_rank: int, chan: int) -> int:
    """QP number of the connection src -> dst on ``chan``, the same at both ends."""
    if src_rank == dst_rank:
        raise ConfigError(f"connection {src_rank} -> {dst_rank}: a rank cannot be its own peer")
    for name, v in (("src_rank", src_rank), ("dst_rank", dst_rank), ("chan", chan)):
        if not 0 <= v <= 255:
            raise ConfigError(f"connection QP number: {name}={v} outside 0..255")
    return (src_rank << 16) | (dst_rank << 8) | chan


def parse_size(text: str) -> int:
    """``4096``, ``64K``, ``1.5M``, ``2G`` (binary units) -> bytes (>= 1)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size {text!r}: expected a number with optional K, M or G")
    n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < 1:
        raise ConfigError(f"size {text!r}: must be at least 1 byte")
    return n


def parse_rate(text: str) -> float:
    """``100M``, ``2.5G``, ``800k``, ``16Mbps`` (decimal units) -> bit/s, 1K..400G: the
    ranks' ``--rate``, and every spec key that becomes one (a preset's ``rate``)."""
    t = text.strip().lower().removesuffix("bps").removesuffix("b/s")
    mult = {"k": 1e3, "m": 1e6, "g": 1e9}.get(t[-1:], 1.0)
    try:
        v = float(t[:-1] if t[-1:] in "kmg" else t) * mult
    except (ValueError, IndexError):
        raise ConfigError(f"rate {text!r}: expected e.g. 100M, 2.5G") from None
    if not 1e3 <= v <= 4e11:
        raise ConfigError(f"rate {text!r}: outside 1K..400G bit/s")
    return v


def rate_arg(text: str) -> float:
    """:func:`parse_rate` as an argparse ``type``: its error as argparse's (the ranks'
    ``--rate``, the controller's ``--max-rate``)."""
    try:
        return parse_rate(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(slots=True, kw_only=True, frozen=True)
class SizeDist:
    """Message size distribution: fixed, uniform or an empirical CDF."""

    kind: str
    lo: int = 0
    hi: int = 0
    sizes: tuple[float, ...] = ()
    probs: tuple[float, ...] = ()

    def sample(self, n: int, seed: int) -> list[int]:
        rng = np.random.default_rng(seed)
        if self.kind == "fixed":
            return [self.lo] * n
        if self.kind == "uniform":
            return [int(x) for x in rng.integers(self.lo, self.hi + 1, size=n)]
        u = rng.random(n)
        vals = np.interp(u, np.asarray(self.probs), np.asarray(self.sizes))
        return [max(1, round(float(v))) for v in vals]

    @property
    def mean(self) -> float:
        if self.kind == "fixed":
            return float(self.lo)
        if self.kind == "uniform":
            return (self.lo + self.hi) / 2
        s, p = np.asarray(self.sizes), np.asarray(self.probs)
        return float(np.sum(np.diff(p) * (s[1:] + s[:-1]) / 2))


def _load_cdf(path: str) -> SizeDist:
    """CDF file: lines ``size cumulative`` (cumulative in 0..1 or 0..100, '#' comments)."""
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"size CDF file {path}: {e.strerror}") from None
    sizes, probs = [], []
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"size CDF {path}:{n}: expected 'size cumulative', got {line!r}")
        try:
            sizes.append(float(parts[0]))
            probs.append(float(parts[1]))
        except ValueError:
            raise ConfigError(f"size CDF {path}:{n}: not numbers: {line!r}") from None
    if len(sizes) < 2:
        raise ConfigError(f"size CDF {path}: needs at least two points")
    pairs = itertools.pairwise
    scale = 100.0 if probs[-1] > 1.0 else 1.0
    probs = [q / scale for q in probs]
    if any(b < a for a, b in pairs(probs)) or any(b < a for a, b in pairs(sizes)):
        raise ConfigError(f"size CDF {path}: sizes and cumulative values must not decrease")
    if abs(probs[-1] - 1.0) > 1e-6 or sizes[0] < 1:
        raise ConfigError(f"size CDF {path}: must end at 1 (or 100) with sizes >= 1")
    return SizeDist(kind="cdf", sizes=tuple(sizes), probs=tuple(probs))


def parse_size_dist(text: str) -> SizeDist:
    """``fixed:64K``, ``uniform:1K:1M``, ``cdf:FILE`` or a bare size (fixed)."""
    kind, _, rest = text.partition(":")
    if not rest:
        return SizeDist(kind="fixed", lo=parse_size(kind))
    if kind == "fixed":
        return SizeDist(kind="fixed", lo=parse_size(rest))
    if kind == "uniform":
        a, _, b = rest.partition(":")
        lo, hi = parse_size(a), parse_size(b) if b else 0
        if not b or hi < lo:
            raise ConfigError(f"size distribution {text!r}: uniform needs LO:HI with LO <= HI")
        return SizeDist(kind="uniform", lo=lo, hi=hi)
    if kind == "cdf":
        return _load_cdf(rest)
    raise ConfigError(
        f"size distribution {text!r}: kind {kind!r} unknown; use fixed:, uniform: or cdf:"
    )


@dataclass(slots=True, kw_only=True)
class FlowSpec:
    """One QP of this rank: its peer rank, channel, and (requester) message sizes."""

    peer: int
    chan: int
    qpn: int
    peer_qpn: int
    sizes: list[int] = field(default_factory=list)  # requester: messages to send
    expect: int = 0  # responder: messages to receive


@dataclass(slots=True, kw_only=True)
class RankPlan:
    pattern: Pattern
    rank: int
    nranks: int
    send: list[FlowSpec]
    recv: list[FlowSpec]


def _flow_send(src: int, dst: int, chan: int, sizes: list[int]) -> FlowSpec:
    q = connection_qpn(src, dst, chan)
    return FlowSpec(peer=dst, chan=chan, qpn=q, peer_qpn=q, sizes=sizes)


def _flow_recv(src: int, dst: int, chan: int, expect: int) -> FlowSpec:
    q = connection_qpn(src, dst, chan)
    return FlowSpec(peer=src, chan=chan, qpn=q, peer_qpn=q, expect=expect)


def make_plan(pattern: Pattern, *, rank: int, nranks: int, qps: int, count: int,
              sizes: SizeDist, seed: int = 1, prefill: int | None = None) -> RankPlan:
    """The part of a workload that concerns ``rank``.

    p2p: rank 0 -> rank 1.  incast: every other rank -> rank 0.  alltoall: every
    ordered pair.  kvcache: every prefill rank ``0..prefill-1`` -> every decode rank
    ``prefill..N-1`` (``prefill`` defaults to N // 2, at least 1).  allreduce: ring
    i -> i+1 over ``qps`` QPs (messages are posted step by step by the runner, each
    step's chunk striped over the QPs; ``count`` iterations).
    """
    if not 2 <= nranks <= MAX_RANKS:
        raise ConfigError(f"workload {pattern.value}: {nranks} hosts, need 2..{MAX_RANKS}")
    if not 0 <= rank < nranks:
        raise ConfigError(f"workload {pattern.value}: rank {rank} outside 0..{nranks - 1}")
    if not 1 <= qps <= MAX_CHANNELS:
        raise ConfigError(f"workload {pattern.value}: qps={qps} outside 1..{MAX_CHANNELS}")
    if count < 1:
        raise ConfigError(f"workload {pattern.value}: count={count} must be >= 1")
    pairs: list[tuple[int, int]]
    if pattern is Pattern.P2P:
        pairs = [(0, 1)]
    elif pattern is Pattern.INCAST:
        pairs = [(s, 0) for s in range(1, nranks)]
    elif pattern is Pattern.ALLTOALL:
        pairs = [(s, d) for s in range(nranks) for d in range(nranks) if s != d]
    elif pattern is Pattern.KVCACHE:
        if prefill is None:
            prefill = max(1, nranks // 2)
        if not 1 <= prefill < nranks:
            raise ConfigError(f"kvcache: prefill={prefill} must be in 1..{nranks - 1}")
        pairs = [(p, d) for p in range(prefill) for d in range(prefill, nranks)]
    elif pattern is Pattern.ALLREDUCE:
        pairs = [(s, (s + 1) % nranks) for s in range(nranks)]
    else:  # pragma: no cover
        raise ConfigError(f"workload {pattern!r} unknown")
    send, recv = [], []
    for s, d in pairs:
        for c in range(qps):
            if pattern is Pattern.ALLREDUCE:
                n = 2 * (nranks - 1) * count
                if s == rank:
                    send.append(_flow_send(s, d, c, []))
                if d == rank:
                    recv.append(_flow_recv(s, d, c, n))
                continue
            if s == rank:
                send.append(_flow_send(s, d, c, sizes.sample(count, seed * 1_000_003
                                                             + s * 65_537 + d * 257 + c)))
            if d == rank:
                recv.append(_flow_recv(s, d, c, count))
    return RankPlan(pattern=pattern, rank=rank, nranks=nranks, send=send, recv=recv)
