"""The native engine (``traffic/native/libtnengine.so``) behind the :class:`Endpoint` API.

Why: the Python endpoint spends tens of microseconds of CPU per packet and paces at
millisecond granularity; the engine runs the same data path in C on its own thread
(batched syscalls, microsecond pacing, traffic/native/tn_verbs.h).  This module gives
it the Python endpoint's interface, so workloads, the runner, the control socket and
the summaries work unchanged: :class:`NativeEndpoint` has ``add_requester``,
``add_responder``, ``step``, ``run``, ``stats``, ``close``; its QPs are proxies with
the attributes the runner reads (``post_write``, ``idle``, ``counters``, ``messages``,
``snapshot``, ``set_rate``, ``set_fec``).

The Python thread only posts, polls completions in batches (waiting on the engine's
completion eventfd with the GIL released) and serves the control socket; packets
never reach Python.  With ``EndpointConfig.realtime`` it does so at real-time
priority, the application's bulk work excepted (:meth:`NativeEndpoint.app_work`).
:func:`make_endpoint` picks the engine: ``native``, ``python``, or ``auto`` (native when the library is built and the run needs nothing only the
Python endpoint runs: CC algorithms other than DCQCN and HPCC, FEC without a working
erasure code in the library).

Step mode (:class:`StepEngine`): the same engine without thread or sockets, driven by
injected packets and an injected clock, for differential tests against
:mod:`traffic.requester` / :mod:`traffic.responder`.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import select
import socket
import struct
import zlib
from collections.abc import Callable
from typing import Self, cast

from common.loss import LossKind, LossModel
from traffic import recovery
from traffic.cc.hpcc import HpccSender, HpccState
from traffic.control import ControlCommand, ControlServer
from traffic.endpoint import Endpoint, EndpointConfig, EndpointCounters
from traffic.errors import ConfigError
from traffic.native import NativeLibraryError, load_library
from traffic.native.cc_dcqcn import TnDcqcn, TnDcqcnParams, dcqcn_params
from traffic.native.cc_hpcc import TnHpcc, TnHpccParams, hpcc_params
from traffic.native.engine_env import check_engine_env
from traffic.qp_types import MessageRecord, QpConfig, QpCounters, Reliability
from traffic.realtime import RealtimePriority
from traffic.requester import full_pkt_wire_bytes

__all__ = ["ENGINES", "NativeEndpoint", "NativeRequester", "NativeResponder", "StepEngine",
           "engine_available", "make_endpoint", "native_unsupported"]

ENGINES = ("auto", "native", "python")
_MODES = {Reliability.GBN: 0, Reliability.SR: 1, Reliability.FEC: 2, Reliability.AUTO: 3}
#: the sender algorithms of traffic.cc.registry the engine runs (its tn_cc values)
NATIVE_CC = {"none": 0, "dcqcn": 1, "hpcc-sender": 2}
_WC_SEND, _WC_RECV = 1, 2
_FLAG_THREAD, _FLAG_STEP = 1, 2
#: native pacer depth: ~50 us of rate (a late wake-up is caught up, a burst is not)
NATIVE_BURST_S = 50e-6
#: ... and caught up at most this much per packet (tn_qp_attr.catchup_s): a wake-up
#: 45 us late costs the next three gaps 15 us each, not one gap its whole length
NATIVE_CATCHUP_S = 15e-6


def _u64(names: list[str]) -> list[tuple[str, type]]:
    return [(n, ctypes.c_uint64) for n in names]


class EngineAttr(ctypes.Structure):
    _fields_ = [("ip", ctypes.c_uint32), ("port", ctypes.c_uint16), ("_pad", ctypes.c_uint16),
                ("flags", ctypes.c_uint32), ("rcvbuf_bytes", ctypes.c_uint32),
                ("batch", ctypes.c_uint32), ("cq_depth", ctypes.c_uint32),
                ("loss_kind", ctypes.c_uint32), ("loss_scope_all", ctypes.c_uint32),
                ("loss_p", ctypes.c_double), ("loss_r", ctypes.c_double),
                ("loss_h", ctypes.c_double), ("loss_k", ctypes.c_double),
                ("loss_seed", ctypes.c_uint64), ("rx_delay_s", ctypes.c_double)]


class QpAttr(ctypes.Structure):
    _fields_ = [("qpn", ctypes.c_uint32), ("peer_qpn", ctypes.c_uint32),
                ("peer_ip", ctypes.c_uint32), ("role", ctypes.c_uint32),
                ("mode", ctypes.c_uint32), ("mtu", ctypes.c_uint32),
                ("rate_bps", ctypes.c_double), ("window_pkts", ctypes.c_uint32),
                ("fec_k", ctypes.c_uint32), ("fec_m", ctypes.c_uint32),
                ("dscp", ctypes.c_uint32), ("rto_min_s", ctypes.c_double),
                ("rto_max_s", ctypes.c_double), ("rto_initial_s", ctypes.c_double),
                ("max_msg_bytes", ctypes.c_uint64), ("start_psn", ctypes.c_uint32),
                ("keep_data", ctypes.c_uint32), ("burst_s", ctypes.c_double),
                ("min_burst_bytes", ctypes.c_uint32), ("sport", ctypes.c_uint32),
                ("cc", ctypes.c_uint32), ("hpcc_window", ctypes.c_uint32),
                ("hpcc_pacing_burst_pkts", ctypes.c_double), ("hpcc", TnHpccParams),
                ("dcqcn", TnDcqcnParams), ("catchup_s", ctypes.c_double)]


_RATE_LOG = 100
ECHO_REJECT_REASONS = ("psn_window", "hop_count", "queue_bytes", "line_rate")


class QpCcC(ctypes.Structure):
    _fields_ = [("rate_bps", ctypes.c_double), ("rate_cap_bps", ctypes.c_double),
                ("hpcc_rtt_s", ctypes.c_double), ("base_rtt_s", ctypes.c_double),
                ("first_queue_s", ctypes.c_double), ("first_cut_s", ctypes.c_double),
                ("max_echo_queue_bytes", ctypes.c_uint64), ("echo_accepted", ctypes.c_uint64),
                ("echo_rejected", ctypes.c_uint64 * 4), ("window_pkts", ctypes.c_uint32),
                ("n_rate_log", ctypes.c_uint32), ("rate_changes", ctypes.c_uint64),
                ("rate_log_t", ctypes.c_double * _RATE_LOG),
                ("rate_log_v", ctypes.c_double * _RATE_LOG),
                ("hpcc", TnHpcc), ("dcqcn", TnDcqcn)]


class Wc(ctypes.Structure):
    _fields_ = [("wr_id", ctypes.c_uint64), ("msg_id", ctypes.c_uint64),
                ("byte_len", ctypes.c_uint64), ("posted_s", ctypes.c_double),
                ("done_s", ctypes.c_double), ("data", ctypes.c_void_p),
                ("qpn", ctypes.c_uint32), ("kind", ctypes.c_uint32),
                ("status", ctypes.c_uint32), ("crc32", ctypes.c_uint32),
                ("retx_pkts", ctypes.c_uint32), ("fec_repaired", ctypes.c_uint32)]


QP_COUNTER_NAMES = [f.name for f in dataclasses.fields(QpCounters)]


class QpCountersC(ctypes.Structure):
    _fields_ = _u64(QP_COUNTER_NAMES)


class EngineCountersC(ctypes.Structure):
    _fields_ = _u64(["rx_pkts", "bad_icrc", "truncated", "bad_echo", "unknown_qp",
                     "wrong_peer", "unexpected_opcode", "kernel_drops", "cnps_tx",
                     "send_errors", "rx_batches", "tx_batches", "wakeups", "spins",
                     "late_departures"]) + [("late_s", ctypes.c_double),
                                            ("realtime", ctypes.c_uint64)] + _u64(
                         ["injected_drops", "injected_data_drops", "injected_repair_drops"]) + [
                         ("timer_late_p99_s", ctypes.c_double), ("spin_lead_s", ctypes.c_double),
                         ("spin_s", ctypes.c_double), ("cpu_s", ctypes.c_double),
                         ("spin_budget", ctypes.c_double), ("budget_out_s", ctypes.c_double),
                         ("rx_poll_s", ctypes.c_double), ("tx_timestamps", ctypes.c_uint64),
                         ("wire_delay_s", ctypes.c_double)] + _u64(
                         ["gso_sends", "gso_pkts", "gro_reads", "gro_pkts"])


class QpStateC(ctypes.Structure):
    _fields_ = [("rate_bps", ctypes.c_double), ("srtt_s", ctypes.c_double),
                ("rto_s", ctypes.c_double)] + _u64(
        ["outstanding", "una", "next_seq", "sent_up_to"]) + [
        (n, ctypes.c_uint32) for n in ("next_new_psn", "expected_psn", "msn", "ooo_now",
                                       "fec_k", "fec_m", "window_pkts", "idle", "sport",
                                       "injected")] + [
        ("last_rtt_s", ctypes.c_double), ("min_rtt_s", ctypes.c_double),
        ("rtt_samples", ctypes.c_uint64)] + _u64(["est_sent", "est_lost", "est_pairs"])


class OutPkt(ctypes.Structure):
    _fields_ = [("qpn", ctypes.c_uint32), ("dst_ip", ctypes.c_uint32),
                ("len", ctypes.c_uint32), ("tos", ctypes.c_uint8),
                ("_pad", ctypes.c_uint8 * 3), ("buf", ctypes.c_uint8 * 9216)]


API_VERSION = 5
"""The library's TN_API_VERSION this binding's structs and calls follow (tn_verbs.h)."""
_P = ctypes.c_void_p
_BOUND = False  # the library's signatures are declared (once per process)


def _bind() -> ctypes.CDLL:
    global _BOUND
    lib = load_library()
    if _BOUND:
        return lib
    sig = {
        "tn_engine_create": (_P, [ctypes.POINTER(EngineAttr), ctypes.c_char_p, ctypes.c_size_t]),
        "tn_engine_start": (ctypes.c_int, [_P]),
        "tn_engine_destroy": (None, [_P]),
        "tn_last_error": (ctypes.c_char_p, [_P]),
        "tn_now": (ctypes.c_double, [_P]),
        "tn_create_qp": (ctypes.c_int, [_P, ctypes.POINTER(QpAttr)]),
        "tn_post_write": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_char_p,
                                         ctypes.c_uint64, ctypes.c_uint64]),
        "tn_post_write_plan": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_char_p,
                                              ctypes.c_uint64, ctypes.c_uint64,
                                              ctypes.POINTER(TnGroup), ctypes.c_uint32]),
        "tn_post_send": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_char_p,
                                        ctypes.c_uint64, ctypes.c_uint64]),
        "tn_poll_cq": (ctypes.c_int, [_P, ctypes.POINTER(Wc), ctypes.c_int]),
        "tn_cq_fd": (ctypes.c_int, [_P]),
        "tn_free": (None, [_P]),
        "tn_set_rate": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_double]),
        "tn_set_fec": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]),
        "tn_set_rx_delay": (ctypes.c_int, [_P, ctypes.c_double]),
        "tn_qp_counters": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(QpCountersC)]),
        "tn_qp_state": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(QpStateC)]),
        "tn_qp_idle": (ctypes.c_int, [_P, ctypes.c_uint32]),
        "tn_path_changed": (ctypes.c_int, [_P, ctypes.c_uint32]),
        "tn_engine_counters": (ctypes.c_int, [_P, ctypes.POINTER(EngineCountersC)]),
        "tn_inject": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_uint16, ctypes.c_char_p,
                                     ctypes.c_uint32, ctypes.c_uint8, ctypes.c_double]),
        "tn_step": (ctypes.c_double, [_P, ctypes.c_double]),
        "tn_step_clock": (None, [_P, ctypes.c_double]),
        "tn_take_output": (ctypes.c_int, [_P, ctypes.POINTER(OutPkt), ctypes.c_int]),
        "tn_api_version": (ctypes.c_int, []),
        "tn_sizeof": (ctypes.c_size_t, [ctypes.c_int]),
        "tn_qp_cc": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(QpCcC)]),
    }
    if not hasattr(lib, "tn_api_version"):  # built before the call existed: version 1
        raise NativeLibraryError(f"native engine: the library is API version 1, this "
                                 f"binding {API_VERSION}: rebuild it (make -C traffic/native)")
    lib.tn_api_version.restype, lib.tn_api_version.argtypes = ctypes.c_int, []
    if lib.tn_api_version() != API_VERSION:   # (before any call it may lack is looked up)
        raise NativeLibraryError(
            f"native engine: the library is API version {lib.tn_api_version()}, this "
            f"binding {API_VERSION}: rebuild it (make -C traffic/native)")
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    for i, cls in enumerate((EngineAttr, QpAttr, Wc, QpCountersC, EngineCountersC, QpStateC,
                             OutPkt, QpCcC)):
        if lib.tn_sizeof(i) != ctypes.sizeof(cls):
            raise NativeLibraryError(
                f"native engine: {cls.__name__} is {ctypes.sizeof(cls)} bytes here but "
                f"{lib.tn_sizeof(i)} in the library: rebuild it (make -C traffic/native)")
    _BOUND = True
    return lib


def engine_available() -> bool:
    """True when ``libtnengine.so`` is built and loads."""
    try:
        _bind()
    except NativeLibraryError:
        return False
    return True


def _ip_u32(ip: str) -> int:
    """IPv4 address as the C side stores it (network byte order in a native u32)."""
    try:
        return struct.unpack("=I", socket.inet_aton(ip))[0]
    except OSError:
        raise ConfigError(f"IPv4 address {ip!r} is not valid") from None


class TnGroup(ctypes.Structure):
    """``struct tn_group``: one group of a message's plan (traffic.recovery.Group)."""

    _fields_ = [("first", ctypes.c_uint32), ("count", ctypes.c_uint32),
                ("blocks", ctypes.c_uint32), ("m", ctypes.c_uint32)]


def estimator_of(st: QpStateC) -> recovery.LossEstimator:
    """The engine's loss counts of a mode-auto requester as a LossEstimator (its
    ``model()`` is the QP's own loss model)."""
    return recovery.LossEstimator(sent=int(st.est_sent), lost=int(st.est_lost),
                                  pairs=int(st.est_pairs))


def plan_groups_c(groups: tuple[recovery.Group, ...]) -> ctypes.Array:
    """A plan's groups as the engine's ``struct tn_group`` array."""
    return (TnGroup * len(groups))(*[TnGroup(g.first, g.count, g.blocks, g.m)
                                     for g in groups])


def _qp_attr(q: QpConfig, role: int, *, start_psn: int, keep_data: bool,
             sport: int = 0, burst_s: float = NATIVE_BURST_S,
             min_burst_bytes: int = 2 * 1100, catchup_s: float = NATIVE_CATCHUP_S) -> QpAttr:
    return QpAttr(qpn=q.qpn, peer_qpn=q.peer_qpn, peer_ip=_ip_u32(q.peer_ip), role=role,
                  mode=_MODES[q.mode], mtu=q.mtu, rate_bps=float(q.rate_bps),
                  window_pkts=q.window_pkts, fec_k=q.fec_k, fec_m=q.fec_m, dscp=q.dscp,
                  rto_min_s=q.rto_min_s, rto_max_s=q.rto_max_s, rto_initial_s=q.rto_initial_s,
                  max_msg_bytes=q.max_msg_bytes, start_psn=start_psn & 0xFFFFFF,
                  keep_data=int(keep_data), burst_s=burst_s, min_burst_bytes=min_burst_bytes,
                  sport=sport, cc=NATIVE_CC[q.cc], hpcc_window=int(q.hpcc.window),
                  hpcc_pacing_burst_pkts=q.hpcc.pacing_burst_pkts, hpcc=hpcc_params(q.hpcc),
                  dcqcn=dcqcn_params(q.dcqcn), catchup_s=catchup_s)


def erasure_code_works() -> bool:
    """True when the library's erasure code (ec.h) encodes: repair 0 is the XOR.

    Through :mod:`traffic.native.ec`, the one binding of ec.h (two modules declaring
    the same functions' argument types on the shared library undo each other)."""
    from traffic.native import ec

    try:
        return ec.encode([b"\x0f\xf0", b"\x01\x02"], 1) == [b"\x0e\xf2"]
    except Exception:  # noqa: BLE001 - any failure of the library means "does not encode"
        return False


def _set_loss(attr: EngineAttr, cfg: EndpointConfig) -> None:
    """The endpoint's receive-side loss model for the engine (its own seeded generator,
    seeded from the Python one: same model and rate, not the same packets)."""
    if not cfg.loss.lossy:
        return
    m = cfg.loss.model
    attr.loss_kind = 1 if m.kind is LossKind.BERNOULLI else 2
    attr.loss_scope_all = int(cfg.loss_scope == "all")
    attr.loss_p, attr.loss_r, attr.loss_h, attr.loss_k = m.p, m.r, m.h, m.k
    attr.loss_seed = cfg.loss._rng.getrandbits(64)  # the run's seed decides it


def native_unsupported(ep_cfg: EndpointConfig, qp_cc: str = "none",
                       mode: Reliability = Reliability.SR) -> str | None:
    """Why this run needs the Python endpoint (None when the engine can run it)."""
    if qp_cc not in NATIVE_CC:
        return f"congestion control {qp_cc!r} (the engine runs {', '.join(NATIVE_CC)})"
    if mode.coded and not erasure_code_works():
        return "FEC: the library's erasure code is not built in yet"
    return None


class _Qp:
    """What requester and responder proxies share."""

    def __init__(self, ep: NativeEndpoint, cfg: QpConfig):
        self.ep = ep
        self.cfg = cfg
        self.counters = QpCounters()
        self.messages: list[MessageRecord] = []
        self._state = QpStateC()
        self.now_s = 0.0

    @property
    def qpn(self) -> int:
        return self.cfg.qpn

    def _refresh(self) -> None:
        if self.ep.closed:  # the counters and state as the endpoint left them
            return
        lib, h = self.ep._lib, self.ep._h
        c = QpCountersC()
        lib.tn_qp_counters(h, self.cfg.qpn, ctypes.byref(c))
        for n in QP_COUNTER_NAMES:
            setattr(self.counters, n, getattr(c, n))
        lib.tn_qp_state(h, self.cfg.qpn, ctypes.byref(self._state))


class _DcqcnView:
    """The engine's DCQCN state with :class:`traffic.cc.dcqcn.DcqcnReactionPoint`'s fields."""

    def __init__(self, d: TnDcqcn):
        self.line_rate_bps = float(d.line_rate_bps)
        self.rate_bps = max(1000.0, float(d.rate_bps))
        self.target_bps = float(d.target_bps)
        self.alpha = float(d.alpha)
        self.cnps_rx, self.cnps_applied = int(d.cnps_rx), int(d.cnps_applied)
        self.rate_cuts, self.rate_increases = int(d.rate_cuts), int(d.rate_increases)
        self.min_rate_seen_bps = float(d.min_rate_seen_bps)

    def snapshot(self) -> dict:
        return {"line_rate_bps": self.line_rate_bps, "rate_bps": self.rate_bps,
                "target_bps": self.target_bps, "alpha": round(self.alpha, 6),
                "cnps_rx": self.cnps_rx, "cnps_applied": self.cnps_applied,
                "rate_cuts": self.rate_cuts, "rate_increases": self.rate_increases,
                "min_rate_bps": self.min_rate_seen_bps}


class NativeRequester(_Qp):
    """A requester QP of the engine, with :class:`traffic.requester.Requester`'s face."""

    dcqcn: _DcqcnView | None = None
    hpcc: HpccState | None = None  # the engine's HPCC state, copied into ``cc``

    def __init__(self, ep: NativeEndpoint, cfg: QpConfig):
        super().__init__(ep, cfg)
        self._msg_id = 0
        self._inflight: dict[int, tuple[MessageRecord, bytes]] = {}
        self.rate_log: list[tuple[float, float]] = [(ep.now(), float(cfg.rate_bps))]
        self.fec_log: list[tuple[float, int, int]] = [(ep.now(), cfg.fec_k, cfg.fec_m)]
        self._cc = QpCcC() if cfg.cc != "none" else None
        self.cc: HpccSender | None = (HpccSender(cfg.rate_bps, cfg.hpcc)
                                      if cfg.cc == "hpcc-sender" else None)
        self._rate_changes = 0
        self.path_notices = 0     # the controller's "route changed" notices
        self.path_resends = 0     # ... that found the QP stalled: resent at once
        # mode auto: the decision is made here, above the engine, per message
        self.policy = recovery.PolicyConfig()
        self.path_loss_log: list[tuple[float, str]] = []
        if cfg.path_loss is not None:
            self.path_loss_log.append((ep.now(), recovery.describe(cfg.path_loss)))

    def _refresh(self) -> None:
        super()._refresh()
        cc = self._cc
        if cc is None or self.ep.closed:
            return
        self.ep._lib.tn_qp_cc(self.ep._h, self.qpn, ctypes.byref(cc))
        self.cfg.rate_bps = float(cc.rate_bps)
        if cc.rate_changes != self._rate_changes:  # the engine's latest rate changes
            new = min(int(cc.rate_changes - self._rate_changes), int(cc.n_rate_log))
            n = int(cc.n_rate_log)
            self.rate_log += [(cc.rate_log_t[i], cc.rate_log_v[i]) for i in range(n - new, n)]
            self._rate_changes = int(cc.rate_changes)
        if self.cfg.cc == "dcqcn":
            self.dcqcn = _DcqcnView(cc.dcqcn)
        elif self.cc is not None:  # HpccSender's figures, from the engine
            h, st = cc.hpcc, self.cc.state
            st.rate_bps, st.ref_rate_bps, st.u = h.rate_bps, h.ref_rate_bps, h.u
            st.inc_stage, st.updates, st.fast_reacts = h.inc_stage, h.updates, h.fast_reacts
            st.skipped_hops, st.path_changes = h.skipped_hops, h.path_changes
            self.cc.min_rtt_s = None if cc.hpcc_rtt_s < 0 else float(cc.hpcc_rtt_s)
            self.cc.first_queue_s = None if cc.first_queue_s < 0 else float(cc.first_queue_s)
            self.cc.first_cut_s = None if cc.first_cut_s < 0 else float(cc.first_cut_s)
            self.cc.max_queue_bytes = int(cc.max_echo_queue_bytes)
            self.hpcc = st

    def _cc_snapshot(self) -> dict:
        """Requester.snapshot's algorithm part: under "dcqcn" or "hpcc"."""
        cc = self._cc
        if cc is None:
            return {}
        if self.dcqcn is not None:
            return {"dcqcn": {**self.dcqcn.snapshot(), "window_pkts": int(cc.window_pkts)}}
        if self.cc is not None:
            rej = {r: int(cc.echo_rejected[i]) for i, r in enumerate(ECHO_REJECT_REASONS)
                   if cc.echo_rejected[i]}
            return {"hpcc": {**self.cc.snapshot(), "window_pkts": int(cc.window_pkts),
                             "echo_rejected": rej}}
        return {}

    def post_write(self, data: bytes | bytearray | memoryview, *, tag: str = "",
                   now: float | None = None) -> MessageRecord:
        """Queue one RDMA WRITE of ``data``; returns its record (filled on completion).

        Mode auto: the message's plan is chosen here (:func:`traffic.recovery.choose`,
        as :class:`traffic.requester.Requester` chooses it) and handed to the engine,
        which executes it (``tn_post_write_plan``)."""
        buf = bytes(data)
        if not buf:
            raise ConfigError(f"QP {self.qpn}: an RDMA WRITE needs at least one byte")
        self._msg_id += 1
        msg = MessageRecord(msg_id=self._msg_id, size=len(buf),
                            posted_s=self.ep.now() if now is None else now,
                            crc32=zlib.crc32(buf), tag=tag)
        lib, h = self.ep._lib, self.ep.handle()
        if self.cfg.mode is Reliability.AUTO:
            npk = -(-len(buf) // self.cfg.mtu)
            plan = self._plan(npk)
            msg.extra["recovery"] = plan.as_dict(npk)
            groups = plan_groups_c(plan.groups)
            rc = lib.tn_post_write_plan(h, self.qpn, buf, len(buf), self._msg_id, groups,
                                        len(groups))
        else:
            rc = lib.tn_post_write(h, self.qpn, buf, len(buf), self._msg_id)
        if rc:
            self._msg_id -= 1
            raise ConfigError(self.ep._error())
        self._inflight[self._msg_id] = (msg, buf)  # the engine reads buf until completion
        self.messages.append(msg)
        return msg

    def _complete(self, wc: Wc) -> None:
        ent = self._inflight.pop(wc.wr_id, None)
        if ent is None:
            return
        msg = ent[0]
        msg.done_s = wc.done_s
        msg.retx_pkts = wc.retx_pkts
        self.counters.msgs_done += 0  # refreshed from the engine in step()

    @property
    def idle(self) -> bool:
        """True when every posted message is acknowledged (on a closed endpoint: when
        none was outstanding as it closed)."""
        if self.ep.closed:
            return int(self._state.outstanding) == 0
        return bool(self.ep._lib.tn_qp_idle(self.ep._h, self.qpn) == 1)

    @property
    def outstanding(self) -> int:
        return int(self._state.outstanding)

    @property
    def srtt_s(self) -> float | None:
        return None if self._state.srtt_s < 0 else float(self._state.srtt_s)

    @property
    def next_new_psn(self) -> int:
        self._refresh()
        return int(self._state.next_new_psn)

    def set_rate(self, rate_bps: float, now: float) -> None:
        """Change the pacing rate (with DCQCN or HPCC: cap their rate)."""
        if self.ep._lib.tn_set_rate(self.ep.handle(), self.qpn, float(rate_bps)):
            raise ConfigError(self.ep._error())
        if self._cc is None:
            self.cfg.rate_bps = float(rate_bps)
            self.rate_log.append((now, float(rate_bps)))
            self._rate_changes += 1
        else:
            self._refresh()

    def set_fec(self, k: int, m: int, now: float) -> None:
        if self.ep._lib.tn_set_fec(self.ep.handle(), self.qpn, k, m):
            raise ConfigError(self.ep._error())
        self.cfg.fec_k, self.cfg.fec_m = k, m
        self.fec_log.append((now, k, m))

    def path_changed(self, now: float) -> bool:
        """The controller moved this QP's route: the engine resets its retransmission
        backoff and resends now if stalled (``traffic.requester.Requester.path_changed``);
        True when it resent."""
        rc = self.ep._lib.tn_path_changed(self.ep.handle(), self.qpn)
        if rc < 0:
            raise ConfigError(self.ep._error())
        self.path_notices += 1
        self.path_resends += rc
        return bool(rc)

    def set_path_loss(self, model: LossModel | None, now: float) -> None:
        """Loss feedback: the next message posted is planned with it (mode auto; a
        fixed mode ignores it)."""
        self.cfg.path_loss = model
        self.path_loss_log.append((now, "none" if model is None else recovery.describe(model)))

    # -- mode auto: the decision above the engine (traffic.requester.Requester's rules) --
    def path_view(self, npk: int = 0) -> recovery.PathView | None:
        """What mode auto decides from: the controller's model, else the QP's own (the
        engine counts the losses of packets sent without repair cover); the RTT, the
        rate, and whether what is posted plus the ``npk`` packets being planned fills
        the round trip."""
        model, source = self.cfg.path_loss, "controller"
        if model is None:
            self._refresh()
            model, source = estimator_of(self._state).model(), "own counters"
        if model is None:
            return None
        srtt = self.srtt_s
        rtt = srtt if srtt is not None else self.cfg.rto_initial_s
        return recovery.make_view(model, source, rtt_s=rtt, rate_bps=self.cfg.rate_bps,
                                  wire_pkt_bytes=full_pkt_wire_bytes(self.cfg.mtu),
                                  rto_min_s=self.cfg.rto_min_s,
                                  posted_pkts=int(self._state.next_seq - self._state.una) + npk,
                                  rtt_measured=srtt is not None)

    def _plan(self, npk: int) -> recovery.MessagePlan:
        self._refresh()  # the engine's RTT and rate
        view = self.path_view(npk)
        if view is None:
            return recovery.MessagePlan(scheme="sr", reason="no loss telemetry yet")
        return recovery.choose(view, npk, self.policy)

    def warm_plans(self, sizes: list[int]) -> None:
        """Decide for messages of these byte sizes now (mode auto): :func:`recovery.warm`."""
        self._refresh()
        view = self.path_view()
        if view is None or self.cfg.mode is not Reliability.AUTO:
            return
        recovery.warm(view, sizes, mtu=self.cfg.mtu, rto_min_s=self.cfg.rto_min_s,
                      cfg=self.policy)

    def scheme_counts(self) -> dict[str, int]:
        """Messages per recovery scheme (mode auto)."""
        return recovery.scheme_counts(self.messages)

    def snapshot(self) -> dict:
        s = self._state
        return {
            "qpn": self.qpn, "peer_qpn": self.cfg.peer_qpn, "peer_ip": self.cfg.peer_ip,
            "mode": self.cfg.mode.value, "rate_bps": self.cfg.rate_bps, "cc": self.cfg.cc,
            "rate_cap_bps": (None if self._cc is None or self._cc.rate_cap_bps < 0
                             else float(self._cc.rate_cap_bps)),
            **self._cc_snapshot(),
            "fec_k": self.cfg.fec_k, "fec_m": self.cfg.fec_m,
            **({"path_loss_changes": [list(x) for x in self.path_loss_log[-100:]],
                "schemes": self.scheme_counts()}
               if self.cfg.mode is Reliability.AUTO else {}),
            "srtt_s": self.srtt_s, "rto_s": s.rto_s, "outstanding": int(s.outstanding),
            "rate_changes": [list(x) for x in self.rate_log[-100:]],
            "fec_changes": [list(x) for x in self.fec_log[-100:]],
            "engine": "native", **self.counters.as_dict(),
        }


class NativeResponder(_Qp):
    """A responder QP of the engine, with :class:`traffic.responder.Responder`'s face."""

    def __init__(self, ep: NativeEndpoint, cfg: QpConfig,
                 on_message: Callable[[NativeResponder, MessageRecord, bytearray], None] | None):
        super().__init__(ep, cfg)
        self.on_message = on_message

    @property
    def msn(self) -> int:
        return int(self._state.msn)

    @property
    def expected_psn(self) -> int:
        return int(self._state.expected_psn)

    def _complete(self, wc: Wc) -> None:
        msg = MessageRecord(msg_id=int(wc.msg_id), size=int(wc.byte_len),
                            posted_s=wc.posted_s, done_s=wc.done_s, crc32=int(wc.crc32),
                            fec_repaired=int(wc.fec_repaired))
        self.messages.append(msg)
        self.now_s = wc.done_s
        data = None
        if wc.data:
            data = bytearray(ctypes.string_at(wc.data, int(wc.byte_len)))
            self.ep._lib.tn_free(wc.data)
        if self.on_message is not None:
            self.on_message(self, msg, data if data is not None else bytearray())

    def snapshot(self) -> dict:
        s = self._state
        return {"qpn": self.qpn, "peer_qpn": self.cfg.peer_qpn, "peer_ip": self.cfg.peer_ip,
                "mode": self.cfg.mode.value, "msn": int(s.msn),
                "expected_psn": int(s.expected_psn), "ooo_now": int(s.ooo_now),
                "engine": "native", **self.counters.as_dict()}


class NativeEndpoint:
    """:class:`traffic.endpoint.Endpoint` on the native engine (same methods and stats)."""

    def __init__(self, cfg: EndpointConfig):
        why = native_unsupported(cfg)  # FEC and CC are checked per QP
        if why is not None:
            raise ConfigError(f"endpoint {cfg.ip}: the native engine does not emulate {why}; "
                              "use --engine python")
        check_engine_env()
        self._lib = _bind()
        self.cfg = cfg
        self.counters = EndpointCounters()
        self.requesters: dict[int, NativeRequester] = {}
        self.responders: dict[int, NativeResponder] = {}
        self.injected_by_qp: dict[int, int] = {}
        self.series: dict[int, list[tuple]] = {}
        self._closed = False
        err = ctypes.create_string_buffer(256)
        attr = EngineAttr(ip=_ip_u32(cfg.ip), port=cfg.port, flags=_FLAG_THREAD,
                          rcvbuf_bytes=cfg.rcvbuf_bytes, batch=min(256, max(1, cfg.batch)))
        _set_loss(attr, cfg)
        attr.rx_delay_s = cfg.delay_s
        h = self._lib.tn_engine_create(ctypes.byref(attr), err, len(err))
        if not h:
            raise ConfigError(err.value.decode(errors="replace"))
        self._h = h
        self._t0 = 0.0
        self._next_sample = 0.0
        self._wcs = (Wc * 256)()
        self._all: dict[int, NativeRequester | NativeResponder] = {}
        try:
            self.control = ControlServer(cfg.control_path) if cfg.control_path else None
            if self._lib.tn_engine_start(h):
                raise ConfigError(self._error())
        except BaseException:
            self._lib.tn_engine_destroy(h)
            self._h = None
            raise
        self._cq_fd = self._lib.tn_cq_fd(h)
        # the driver thread (this one) at real-time priority while open, as the Python
        # endpoint's loop: it posts the next message when a completion opens the window,
        # and at normal priority behind the real-time engines and delay line of a 2-core
        # test bed a post waited 30-55 ms for a CPU (7-13 ms median lag on a 20 ms path)
        self.priority = RealtimePriority()
        if cfg.realtime:
            self.priority.enter()

    def app_work(self) -> contextlib.AbstractContextManager[None]:
        """Normal priority for the application's bulk work (reducing received chunks):
        four all-reduce ranks reducing at real-time priority took both cores from the
        host, and a peer's timer fired when the kernel's fair server paused them; the
        engine's thread is the NIC here, not this one, so no ACK waits meanwhile.
        Posting and reaping stay real-time, and so does building a message's payload
        (~1 ms per 256 KiB): built at normal priority behind busy real-time engines, it
        held the thread while the completion it waited for came, reaped 13-17 ms late."""
        return self.priority.paused()

    @property
    def closed(self) -> bool:
        return self._h is None

    def handle(self) -> int:
        """The engine's handle for a call into the library, which takes no NULL: on a
        closed endpoint a :class:`ConfigError` (a QP used after ``close`` crashed the
        process)."""
        if self._h is None:
            raise ConfigError("the native endpoint is closed")
        return self._h

    def _error(self) -> str:
        msg = self._lib.tn_last_error(self._h)
        return msg.decode(errors="replace") if msg else "native engine error"

    # -- QPs -------------------------------------------------------------------------
    def _add(self, qcfg: QpConfig, role: int, start_psn: int, keep_data: bool) -> None:
        attr = _qp_attr(qcfg, role, start_psn=start_psn, keep_data=keep_data)
        if self._lib.tn_create_qp(self.handle(), ctypes.byref(attr)):
            raise ConfigError(self._error())

    def add_requester(self, qcfg: QpConfig, *, start_psn: int = 0) -> NativeRequester:
        self._add(qcfg, 0, start_psn, False)
        r = NativeRequester(self, qcfg)
        self.requesters[qcfg.qpn] = self._all[qcfg.qpn] = r
        self.series[qcfg.qpn] = []
        r._refresh()
        return r

    def add_responder(self, qcfg: QpConfig, *, start_psn: int = 0,
                      on_message: Callable | None = None) -> NativeResponder:
        self._add(qcfg, 1, start_psn, on_message is not None)
        r = NativeResponder(self, qcfg, on_message)
        self.responders[qcfg.qpn] = self._all[qcfg.qpn] = r
        self.series[qcfg.qpn] = []
        r._refresh()
        return r

    def set_rx_delay(self, delay_s: float) -> None:
        """Change the receive delay at run time (a slow host; packets held keep theirs)."""
        if self._lib.tn_set_rx_delay(self.handle(), float(delay_s)):
            raise ConfigError(self._error())
        self.cfg.delay_s = delay_s

    def now(self) -> float:
        """Seconds since the engine started (the time base of every record)."""
        return float(self._lib.tn_now(self.handle()))

    # -- loop --------------------------------------------------------------------------
    def _poll_cq(self) -> int:
        n_all = 0
        while True:
            n = self._lib.tn_poll_cq(self._h, self._wcs, len(self._wcs))
            for i in range(n):
                wc = self._wcs[i]
                q = self._all.get(wc.qpn)
                if q is not None:
                    q._complete(wc)
                elif wc.data:
                    self._lib.tn_free(wc.data)
            n_all += n
            if n < len(self._wcs):
                return n_all

    def _refresh(self) -> None:
        for q in self._all.values():
            q._refresh()
        c = EngineCountersC()
        self._lib.tn_engine_counters(self._h, ctypes.byref(c))
        for f in ("rx_pkts", "bad_icrc", "truncated", "bad_echo", "unknown_qp", "wrong_peer",
                  "unexpected_opcode", "kernel_drops", "cnps_tx", "send_errors",
                  "injected_drops", "injected_data_drops", "injected_repair_drops"):
            setattr(self.counters, f, int(getattr(c, f)))
        self.injected_by_qp = {q: int(r._state.injected) for q, r in self._all.items()
                               if r._state.injected}
        self._engine_counters = c

    # the control socket is served, and series sampled, exactly as the Python endpoint
    # does it (its methods read only what this class has under the same names)
    def _control(self, now: float) -> None:
        Endpoint._control(cast(Endpoint, self), now)

    def _apply_control(self, cmd: ControlCommand, now: float, addr: str | bytes | None,
                       confirm: list[dict]) -> None:
        Endpoint._apply_control(cast(Endpoint, self), cmd, now, addr, confirm)

    def _sample(self, now: float) -> None:
        Endpoint._sample(cast(Endpoint, self), now)

    def step(self, max_wait_s: float = 0.01) -> None:
        """Wait for completions (or a control request, or the next sample), then take
        them, serve the control socket and sample.

        Why wait first: :meth:`run` calls its ``on_tick`` (the runner posts the next
        message there) right after this returns, so what woke the loop must already be
        taken.  Taken at the start of the next call instead, the completion that woke
        the loop reached the runner only after another full wait: the next message was
        posted 10 ms after its window opened, and a 100 Mbit/s, 20 ms path with two
        256 KiB messages in flight idled a quarter of the time.
        """
        fds = [self._cq_fd] + ([self.control.sock] if self.control else [])
        due = self._next_sample - self._t0 - self.now()
        select.select(fds, [], [], max(0.0, min(max_wait_s, due)))
        self._poll_cq()
        self._refresh()
        now = self.now()
        if self.control is not None:
            self._control(now)
        if now >= self._next_sample - self._t0:
            self._sample(now)

    def run(self, until: Callable[[], bool], *, timeout_s: float,
            on_tick: Callable[[float], None] | None = None) -> bool:
        """Loop until ``until()`` is true (returns True) or ``timeout_s`` passes (False)."""
        end = self.now() + timeout_s
        while not until():
            if self.now() > end:
                return False
            self.step()
            if on_tick is not None:
                on_tick(self.now())
        self._poll_cq()
        self._refresh()
        self._sample(self.now())
        return True

    def engine_info(self) -> dict | None:
        """The engine thread's counters (``realtime``: it got real-time priority)."""
        c = getattr(self, "_engine_counters", None)
        if c is None:
            return None
        return {"name": "native", **{n: getattr(c, n) for n, _ in c._fields_},
                **{f"driver_{k}": v for k, v in self.priority.snapshot().items()}}

    def stats(self, *, compact: bool = False) -> dict:
        """The counters as the engine has them now (the last step's copy can be a step
        behind: a loop that stops on another endpoint's condition read a sender's
        retransmissions short of what it had sent)."""
        if self._h:
            self._refresh()
        return Endpoint.stats(cast(Endpoint, self), compact=compact)

    def close(self) -> None:
        """Stop the engine thread, close its sockets and the control socket (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.priority.leave()
        if self._h:
            try:
                self._poll_cq()
                self._refresh()
            finally:
                self._lib.tn_engine_destroy(self._h)
                self._h = None
        if self.control is not None:
            self.control.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_endpoint(cfg: EndpointConfig, engine: str = "auto",
                  cc: str = "none", *,
                  mode: Reliability = Reliability.SR) -> Endpoint | NativeEndpoint:
    """The endpoint of ``engine``: ``native``, ``python``, or ``auto`` (native when the
    library is built and the run needs nothing only the Python endpoint emulates)."""
    if engine not in ENGINES:
        raise ConfigError(f"engine {engine!r} unknown; choose one of {', '.join(ENGINES)}")
    if engine == "python":
        return Endpoint(cfg)
    if engine == "auto" and not engine_available():
        return Endpoint(cfg)
    why = native_unsupported(cfg, cc, mode)
    if engine == "native":
        if why is not None:
            raise ConfigError(f"--engine native: the native engine does not support {why} "
                              "yet; use --engine python")
        return NativeEndpoint(cfg)
    if why is not None:
        return Endpoint(cfg)
    return NativeEndpoint(cfg)


class StepEngine:
    """The engine in step mode: no thread, no socket; packets in, packets out.

    ``inject`` hands it a received UDP payload at time ``now``; ``step(now)`` sends the
    ACKs owed and lets every requester send what its pacer allows, and returns the next
    due time (None when nothing is due); ``output()`` returns what it would have sent as
    ``(local qpn, dst ip, tos, payload)``.
    """

    def __init__(self, ip: str, port: int = 4791):
        self._lib = _bind()
        err = ctypes.create_string_buffer(256)
        attr = EngineAttr(ip=_ip_u32(ip), port=port, flags=_FLAG_STEP)
        self._h = self._lib.tn_engine_create(ctypes.byref(attr), err, len(err))
        if not self._h:
            raise ConfigError(err.value.decode(errors="replace"))
        self._out = (OutPkt * 64)()
        self._keep: list[bytes] = []
        self._wcs = (Wc * 64)()

    def add_qp(self, q: QpConfig, *, requester: bool, sport: int, start_psn: int = 0,
               burst_s: float = 0.005, min_burst_bytes: int = 2 * 1100,
               catchup_s: float = 0.0) -> None:
        attr = _qp_attr(q, 0 if requester else 1, start_psn=start_psn, keep_data=False,
                        sport=sport, burst_s=burst_s, min_burst_bytes=min_burst_bytes,
                        catchup_s=catchup_s)
        if self._lib.tn_create_qp(self._h, ctypes.byref(attr)):
            raise ConfigError(self._lib.tn_last_error(self._h).decode())

    def post_write(self, qpn: int, data: bytes,
                   plan: recovery.MessagePlan | None = None) -> None:
        """Post an RDMA WRITE; with ``plan`` (mode auto) sent as its groups say."""
        self._keep.append(data)
        if plan is not None and plan.groups:
            arr = plan_groups_c(plan.groups)
            rc = self._lib.tn_post_write_plan(self._h, qpn, data, len(data), len(self._keep),
                                              arr, len(arr))
        else:
            rc = self._lib.tn_post_write(self._h, qpn, data, len(data), len(self._keep))
        if rc:
            raise ConfigError(self._lib.tn_last_error(self._h).decode())

    def set_rate(self, qpn: int, rate: float) -> None:
        if self._lib.tn_set_rate(self._h, qpn, rate):
            raise ConfigError(self._lib.tn_last_error(self._h).decode())

    def set_fec(self, qpn: int, k: int, m: int) -> None:
        if self._lib.tn_set_fec(self._h, qpn, k, m):
            raise ConfigError(self._lib.tn_last_error(self._h).decode())

    def inject(self, src_ip: str, sport: int, payload: bytes, now: float, tos: int = 2) -> None:
        self._lib.tn_inject(self._h, _ip_u32(src_ip), sport, payload, len(payload), tos, now)

    def clock(self, now: float) -> None:
        """Set the time of the next calls (post, set_rate, set_fec) without stepping."""
        self._lib.tn_step_clock(self._h, now)

    def step(self, now: float) -> float | None:
        w = self._lib.tn_step(self._h, now)
        return None if w < 0 else float(w)

    def output(self) -> list[tuple[int, str, int, bytes]]:
        res = []
        while True:
            n = self._lib.tn_take_output(self._h, self._out, len(self._out))
            for i in range(n):
                o = self._out[i]
                res.append((o.qpn, socket.inet_ntoa(struct.pack("=I", o.dst_ip)), o.tos,
                            bytes(o.buf[:o.len])))
            if n < len(self._out):
                return res

    def completions(self) -> list[tuple[int, int, int, int]]:
        """(qpn, kind, msg_id, crc32) of the completions so far (1 send, 2 receive)."""
        res = []
        while True:
            n = self._lib.tn_poll_cq(self._h, self._wcs, len(self._wcs))
            for i in range(n):
                w = self._wcs[i]
                res.append((w.qpn, w.kind, int(w.msg_id), int(w.crc32)))
                if w.data:
                    self._lib.tn_free(w.data)
            if n < len(self._wcs):
                return res

    def counters(self, qpn: int) -> dict[str, int]:
        c = QpCountersC()
        self._lib.tn_qp_counters(self._h, qpn, ctypes.byref(c))
        return {n: int(getattr(c, n)) for n in QP_COUNTER_NAMES}

    def loss_estimate(self, qpn: int) -> recovery.LossEstimator:
        """A mode-auto requester's own loss counts (:class:`recovery.LossEstimator`)."""
        return estimator_of(self.state(qpn))

    def state(self, qpn: int) -> QpStateC:
        s = QpStateC()
        self._lib.tn_qp_state(self._h, qpn, ctypes.byref(s))
        return s

    def close(self) -> None:
        if self._h:
            self._lib.tn_engine_destroy(self._h)
            self._h = None

    def __del__(self) -> None:
        self.close()
