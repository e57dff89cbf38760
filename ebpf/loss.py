"""Packet loss on an interface without netem: Bernoulli or Gilbert-Elliott, in eBPF.

Usage (the WAN link class and traffic tests)::

    with LossEmulator("s1-eth2", netns="wan") as loss:     # tc ingress of that iface
        loss.set_bernoulli(0.01)                             # 1 % random loss
        loss.set_model(LossModel.gilbert_elliott(p=0.001, r=0.25))  # bursts of 4 on average
        loss.set_model(LossModel.parse("ge:1%/10@120us"))    # ... that also end with time
        loss.disable()                                       # change any time, no reload
        loss.reseed(7)                                       # repeatable drop pattern
        c = loss.counters()                                  # matched, dropped, bursts, ...

Only IPv4 is dropped (ARP, IPv6 neighbour discovery always pass), also when it follows
a link sequence header (EtherType 0x88B5, switch-to-switch links; ``link_seq=False``
lets those frames pass), optionally only UDP (``udp_only``) and one UDP destination
port (``udp_dport``).  Use ``direction="egress"``
to drop on the way out.  Parameters live in a BPF map: every setter takes effect for
the next packet.  The kernel side is ``loss.c``; the model is :mod:`common.loss`'s
(the kernel's p_gb, p_bg, loss_good, loss_bad are its p, r, 1 - k, 1 - h).
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
from types import TracebackType
from typing import Self, TextIO

import numpy as np

from common.kernel.errors import AttachError
from common.kernel.tc import Direction, TcAttachment, attach_tc
from common.loss import LossKind, LossModel

from .errors import ConfigError
from .loader import compile_program

__all__ = ["LossCounters", "LossEmulator"]

_MODES = {"off": 0, "bernoulli": 1, "gilbert_elliott": 2}
_ONE = 1 << 32


class _Config(ctypes.Structure):
    _fields_ = [("p_drop", ctypes.c_uint64), ("p_gb", ctypes.c_uint64),
                ("p_bg", ctypes.c_uint64), ("loss_good", ctypes.c_uint64),
                ("loss_bad", ctypes.c_uint64), ("mode", ctypes.c_uint32),
                ("udp_only", ctypes.c_uint32), ("udp_dport", ctypes.c_uint32),
                ("link_seq", ctypes.c_uint32), ("seeded", ctypes.c_uint32),
                ("pad", ctypes.c_uint32), ("slot_ns", ctypes.c_uint64),
                ("pi_bad", ctypes.c_uint64), ("lam", ctypes.c_uint64),
                ("lam_neg", ctypes.c_uint32), ("pad2", ctypes.c_uint32)]


def _rng_state(seed: int) -> int:
    """Non-zero 64-bit xorshift state from any integer seed (splitmix64 finaliser)."""
    z = (seed + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) or 1


def _threshold(name: str, p: float) -> int:
    if not (isinstance(p, (int, float)) and math.isfinite(p) and 0.0 <= p <= 1.0):
        raise ConfigError(f"loss parameter {name}={p!r}: expected a probability in [0, 1]")
    return min(_ONE, round(p * _ONE))


@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class LossCounters:
    """Counts since attach (or the last ``reset_counters``)."""

    matched: int
    dropped: int
    bursts: int
    bad_packets: int
    burst_histogram: np.ndarray
    """Finished bursts by length: index n = bursts of n drops (last index: >= 63)."""

    @property
    def loss_rate(self) -> float:
        return self.dropped / self.matched if self.matched else 0.0

    @property
    def mean_burst_len(self) -> float:
        return self.dropped / self.bursts if self.bursts else 0.0


class LossEmulator:
    """Loss on one interface's tc hook (optionally inside a named namespace)."""

    def __init__(self, iface: str, *, netns: str | None = None,
                 direction: Direction = "ingress", prio: int = 5,
                 udp_only: bool = False, udp_dport: int = 0, link_seq: bool = True,
                 seed: int | None = None, dump_source: TextIO | None = None) -> None:
        if not 0 <= udp_dport <= 0xFFFF:
            raise ConfigError(f"udp_dport {udp_dport}: expected 0..65535 (0: any)")
        self.iface, self.netns, self.direction, self.prio = iface, netns, direction, prio
        self._udp_only = udp_only or udp_dport != 0
        self._udp_dport = udp_dport
        self._dump = dump_source
        self._bpf = None
        self._tc: TcAttachment | None = None
        self._cfg = _Config(udp_only=int(self._udp_only), udp_dport=udp_dport,
                            link_seq=int(link_seq))
        self._seed = seed

    def attach(self) -> Self:
        """Load and attach with loss off; nothing stays attached on failure."""
        if self._bpf is not None:
            return self
        bpf = compile_program("loss.c", {}, dump_source=self._dump)
        self._bpf = bpf
        try:
            from bcc import BPF
            fn = bpf.load_func(b"loss_filter", BPF.SCHED_CLS)
            self.reseed(self._seed)
            self._tc = attach_tc(fn.fd, "loss_filter", self.iface, netns=self.netns,
                                 direction=self.direction, prio=self.prio)
        except Exception as exc:
            self.close()
            if isinstance(exc, AttachError):
                raise
            raise AttachError(f"cannot load loss_filter for {self.iface}: {exc}") from None
        return self

    def close(self) -> None:
        """Detach and free; safe to call twice."""
        try:
            if self._tc is not None:
                self._tc.detach()
        finally:
            self._tc = None
            if self._bpf is not None:
                self._bpf.cleanup()
                self._bpf = None

    def __enter__(self) -> Self:
        return self.attach()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _need(self):
        if self._bpf is None:
            raise AttachError(f"loss_filter on {self.iface} is not attached (call attach())")
        return self._bpf

    def _write(self) -> None:
        table = self._need()[b"config"]
        table[table.Key(0)] = table.Leaf.from_buffer_copy(bytes(self._cfg))

    # -- run-time parameters -------------------------------------------------------
    def set_bernoulli(self, p_drop: float) -> None:
        """Drop each matched packet independently with probability ``p_drop``."""
        self._cfg.p_drop = _threshold("p_drop", p_drop)
        self._cfg.mode = _MODES["bernoulli"]
        self._write()

    def set_model(self, model: LossModel) -> LossModel:
        """Drop as ``model`` says (none: loss off); returns it, with its implied rates."""
        if model.kind is LossKind.NONE:
            self.disable()
        elif model.kind is LossKind.BERNOULLI:
            self.set_bernoulli(model.p)
        else:
            self._cfg.p_gb = _threshold("p", model.p)
            self._cfg.p_bg = _threshold("r", model.r)
            self._cfg.loss_good = _threshold("1 - k", 1.0 - model.k)
            self._cfg.loss_bad = _threshold("1 - h", 1.0 - model.h)
            self._set_clock(model)
            self._cfg.mode = _MODES["gilbert_elliott"]
            self._write()
        return model

    def _set_clock(self, model: LossModel) -> None:
        """The chain's clock (:attr:`LossModel.slot_s`) and the constants of its n-step
        transition (:meth:`LossModel.bad_after`) in the kernel's fixed point."""
        slot = model.slot_s
        if not (math.isfinite(slot) and 0.0 <= slot <= 1.0):
            raise ConfigError(f"loss slot {slot!r} s: expected 0..1 s")
        self._cfg.slot_ns = round(slot * 1e9)
        lam = 1.0 - model.p - model.r
        self._cfg.pi_bad = _threshold("p/(p+r)", model.bad_fraction)
        self._cfg.lam = min(_ONE - 1, round(abs(lam) * _ONE))
        self._cfg.lam_neg = int(lam < 0)

    def reseed(self, seed: int | None) -> None:
        """Draw from a generator seeded with ``seed`` (same seed, same drops for the same
        packet sequence on one CPU), or from the kernel's random numbers (None)."""
        bpf = self._need()
        table = bpf[b"state"]
        cur = table[table.Key(0)]
        if seed is not None:
            cur.rng = _rng_state(seed)
            cur.in_bad = 0
            cur.run = 0
            cur.clock_ns = 0
        table[table.Key(0)] = cur
        self._cfg.seeded = int(seed is not None)
        self._write()

    def disable(self) -> None:
        """Pass everything (the program stays attached)."""
        self._cfg.mode = _MODES["off"]
        self._write()

    # -- counters ------------------------------------------------------------------
    def counters(self) -> LossCounters:
        bpf = self._need()
        table = bpf[b"state"]
        st = table[table.Key(0)]
        hist_t = bpf[b"burst_hist"]
        hist = np.array([hist_t[hist_t.Key(i)].value for i in range(len(hist_t))], np.uint64)
        return LossCounters(matched=st.matched, dropped=st.dropped, bursts=st.bursts,
                            bad_packets=st.bad_packets, burst_histogram=hist)

    def reset_counters(self) -> None:
        """Zero the counters and the burst histogram (GE state and generator stay)."""
        bpf = self._need()
        table = bpf[b"state"]
        cur = table[table.Key(0)]
        table[table.Key(0)] = table.Leaf(in_bad=cur.in_bad, rng=cur.rng, clock_ns=cur.clock_ns)
        h = bpf[b"burst_hist"]
        for i in range(len(h)):
            h[h.Key(i)] = h.Leaf(0)
