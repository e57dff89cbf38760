"""Runs one rank of a workload on an endpoint and builds its JSON summary.

Message contents are pseudo-random bytes seeded by (seed, rank, QP, message index),
and both ends record each message's CRC-32; every receiver regenerates what its peers
sent (all ranks share one seed) and checks each message's CRC-32 against it, so a run
proves that every message arrived intact (``collective.result_ok``; None, no verdict,
when the run did not finish).  Ring all-reduce moves real float32 data: reduce-scatter
then all-gather, ``2 (N - 1)`` steps of ``message / N`` bytes, each step sent only
after the previous one arrived, and the result is compared with the sum every rank
can recompute.
"""
from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TextIO

import numpy as np

from common.loss import LossModel
from traffic import fec_codec
from traffic.cc.dcqcn import DcqcnSettings
from traffic.cc.hpcc import HpccSender, HpccSettings
from traffic.collog.tracker import RankTracker
from traffic.collog.writer import CollectiveLogWriter
from traffic.control import ControlCommand
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.errors import WorkloadError
from traffic.host_faults import HostFaults
from traffic.native_endpoint import NativeRequester, NativeResponder, make_endpoint
from traffic.qp_types import DEFAULT_MTU, RTO_MIN_S, MessageRecord, QpConfig, Reliability
from traffic.requester import Requester
from traffic.responder import Responder
from traffic.workloads import Pattern, RankPlan

__all__ = ["QpParams", "RankRunner", "message_bytes"]


@dataclass(slots=True, kw_only=True)
class QpParams:
    """Settings applied to every QP of a run."""

    mode: Reliability = Reliability.SR
    mtu: int = DEFAULT_MTU
    rate_bps: float = 100e6
    window_pkts: int = 512
    fec_k: int = 8
    fec_m: int = 1
    rto_min_s: float = RTO_MIN_S
    dscp: int = 0
    cc: str = "none"  # a sender algorithm of traffic.cc.registry
    dcqcn: DcqcnSettings = field(default_factory=DcqcnSettings)
    hpcc: HpccSettings = field(default_factory=HpccSettings)
    path_loss: LossModel | None = None  # mode auto: the controller's model of the path


def message_bytes(seed: int, rank: int, qpn: int, index: int, size: int) -> bytes:
    """Deterministic payload of one message (both ends can regenerate it)."""
    rng = np.random.default_rng([seed, rank, qpn, index])
    return rng.integers(0, 256, size=size, dtype=np.uint8).tobytes()


def _allreduce_input(seed: int, rank: int, nelem: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 0xA11, rank])
    return rng.integers(0, 1000, size=nelem).astype(np.float32)


class _AllReduce:
    """Ring all-reduce state of one rank: Q QPs to rank+1, Q QPs from rank-1.

    Each step's chunk is striped over the Q QPs of the ring link; a step counts as
    received when every stripe has arrived (QPs deliver in order, but one QP may
    already carry the next step while another still carries this one).
    """

    def __init__(self, runner: RankRunner, msg_bytes: int, iterations: int,
                 first_iter: int = 0):
        self.r = runner
        self.n = runner.plan.nranks
        self.rank = runner.plan.rank
        self.q = max(1, len(runner.plan.send))
        self.nelem = max(self.n * self.q, msg_bytes // 4)
        self.iterations = iterations
        self.steps_per_iter = 2 * (self.n - 1)
        # a spare that took a moved rank over starts at the move's iteration
        self.first_iter = first_iter
        self.iter = first_iter
        self.step_rx = 0  # steps received in the current iteration
        self.steps_sent = 0
        self.steps_received = 0
        self.iter_start = 0.0
        self.iter_times: list[float] = []
        self.ok = True
        # every iteration reduces the same inputs: the own input and the expected sum
        # are made once, before the clock runs (drawing N inputs at an iteration's end
        # stalled the rank for tens of ms, long enough for its peers' timers to fire)
        self._input = _allreduce_input(self.r.seed, self.rank, self.nelem)
        self._expect = sum(_allreduce_input(self.r.seed, r, self.nelem) for r in range(self.n))
        self.data = self._input.copy()
        self.bounds = np.linspace(0, self.nelem, self.n + 1).astype(int)
        self._stripes: dict[int, dict[int, bytes]] = {}  # global step -> channel -> data
        self._next = 0  # next global step to apply

    def _chunk(self, idx: int) -> slice:
        return slice(self.bounds[idx], self.bounds[idx + 1])

    def _stripes_of(self, sl: slice) -> list[slice]:
        edges = np.linspace(sl.start, sl.stop, self.q + 1).astype(int)
        return [slice(edges[c], edges[c + 1]) for c in range(self.q)]

    def _send_step(self, s: int, now: float) -> None:
        n, i = self.n, self.rank
        idx = (i - s) % n if s < n - 1 else (i + 1 - (s - (n - 1))) % n
        # the stripes are copied now: a deferred step must send this step's data, and
        # on this step's QP (a rank move re-points the channel for later steps)
        parts = [(self.r.requesters[c], self.data[part].tobytes(), f"ar{self.iter}.{s}.{c}")
                 for c, part in enumerate(self._stripes_of(self._chunk(idx)))]
        late = self.r.faults.step_delay(now) if self.r.faults is not None else 0.0
        if late > 0:  # an injected straggler: post this step later (RankRunner tick)
            self.r.deferred.append((now + late, parts))
        else:
            self.post(parts, now)
        self.steps_sent += 1

    def post(self, parts: list[tuple[Requester | NativeRequester, bytes, str]],
             now: float) -> None:
        for req, data, tag in parts:
            req.post_write(data, tag=tag, now=now)

    def start(self, now: float) -> None:
        self.iter_start = now
        self.r.at_iteration(self.iter, now)  # a pending rank move re-points the QPs here
        self._send_step(0, now)

    def receiver(self, first_step: int = 0) -> Callable[[Responder, MessageRecord, bytearray],
                                                         None]:
        """The message callback of one responder QP whose first message is global step
        ``first_step`` (steps counted over iterations): 0 for the QPs of the job's
        start, the move's first step for the QP from a rank's new host."""
        count = [first_step]

        def on_message(resp: Responder, msg: MessageRecord, buf: bytearray) -> None:
            k = count[0]
            count[0] += 1
            with self.r.ep.app_work():  # the reduction, and the next step's post
                self.on_stripe(resp.qpn & 0xFF, k, buf, resp.now_s)
        return on_message

    def on_stripe(self, c: int, k: int, buf: bytearray, now: float) -> None:
        """Stripe of global step ``k`` on channel ``c`` (workloads.connection_qpn)."""
        if c >= self.q:
            raise WorkloadError(f"all-reduce rank {self.rank}: message on unknown channel {c}")
        self._stripes.setdefault(k, {})[c] = bytes(buf)
        while len(self._stripes.get(self._next, ())) == self.q:
            parts = self._stripes.pop(self._next)
            self._next += 1
            self._apply(b"".join(parts[x] for x in range(self.q)), now)

    def _apply(self, data: bytes, now: float) -> None:
        n, i, s = self.n, self.rank, self.step_rx
        got = np.frombuffer(data, dtype=np.float32)
        if s < n - 1:
            sl = self._chunk((i - s - 1) % n)
            if got.size != sl.stop - sl.start:
                raise WorkloadError(f"all-reduce rank {i} step {s}: chunk of {got.size} "
                                    f"elements, expected {sl.stop - sl.start}")
            self.data[sl] += got
        else:
            sl = self._chunk((i - (s - (n - 1))) % n)
            self.data[sl] = got
        self.steps_received += 1
        self.step_rx += 1
        if self.step_rx < self.steps_per_iter:
            self._send_step(self.step_rx, now)
            return
        # iteration complete: check the result, start the next one
        self.ok = self.ok and bool(np.array_equal(self.data, self._expect))
        self.iter_times.append(now - self.iter_start)
        self.iter += 1
        self.step_rx = 0
        if self.iter < self.iterations:
            self.data = self._input.copy()
            self.start(now)

    @property
    def done(self) -> bool:
        return self.iter >= self.iterations

    def summary(self, msg_bytes: int) -> dict:
        times = self.iter_times
        return {
            "algorithm": "ring", "ranks": self.n, "iterations": self.iter - self.first_iter,
            "first_iteration": self.first_iter, "qps": self.q,
            "steps_per_iteration": self.steps_per_iter, "steps_sent": self.steps_sent,
            "steps_received": self.steps_received, "chunk_bytes": int(self.nelem // self.n * 4),
            "message_bytes": int(self.nelem * 4),
            # no verdict (None) before the last iteration's result is complete
            "result_ok": self.ok if self.done else None,
            "completion_s": times,
            "algbw_bps": [self.nelem * 4 * 8 / t if t > 0 else None for t in times],
        }


class RankRunner:
    """Sets up the QPs of ``plan`` on a fresh endpoint and drives them to completion."""

    def __init__(self, plan: RankPlan, hosts: list[str], ep_cfg: EndpointConfig,
                 qp: QpParams, *, seed: int = 1, inflight: int = 4,
                 allreduce_bytes: int = 1 << 20, iterations: int = 1,
                 coll_log: CollectiveLogWriter | None = None, comm: str = "",
                 faults: HostFaults | None = None, engine: str = "python",
                 first_iter: int = 0):
        if len(hosts) != plan.nranks:
            raise WorkloadError(f"{len(hosts)} host addresses for {plan.nranks} ranks")
        self.plan, self.hosts, self.qp, self.seed = plan, hosts, qp, seed
        # KV-cache transfers are bursts: every message of a QP is posted at once
        self.inflight = (10**9 if plan.pattern is Pattern.KVCACHE else max(1, inflight))
        # the data path: traffic.native_endpoint.make_endpoint picks native or python
        self.ep = make_endpoint(ep_cfg, engine, qp.cc, mode=qp.mode)
        self.engine = "python" if isinstance(self.ep, Endpoint) else "native"
        self.requesters: list[Requester | NativeRequester] = []
        self.responders: list[Responder | NativeResponder] = []
        self._posted: list[int] = []
        self._ready: dict[int, bytes] = {}   # QP index -> the payload of its next message
        self._ar = (_AllReduce(self, allreduce_bytes, iterations, first_iter)
                    if plan.pattern is Pattern.ALLREDUCE else None)
        self.allreduce_bytes = allreduce_bytes
        try:
            for f in plan.send:
                self.requesters.append(self.ep.add_requester(self._qcfg(f.qpn, f.peer_qpn, f.peer)))
                self._posted.append(0)
            for f in plan.recv:
                cb = self._ar.receiver() if self._ar else None
                self.responders.append(self.ep.add_responder(
                    self._qcfg(f.qpn, f.peer_qpn, f.peer), on_message=cb))
        except Exception:
            self.ep.close()
            raise
        if qp.mode is Reliability.AUTO:
            # decide once for every message size before the clock runs: a first decision
            # takes tens of ms (block probabilities), a stall inside the transfer
            sizes = sorted({s for f in plan.send for s in f.sizes})[:64]
            if self._ar is not None:
                sizes = sorted({*sizes, max(1, allreduce_bytes // max(1, plan.nranks))})
            # seconds of CPU: at normal priority, or the watchdog would take the loop's
            # real-time priority for the whole run
            with self.ep.priority.paused():
                for req in self.requesters:
                    req.warm_plans(sizes)  # Requester and NativeRequester alike
        self.faults = faults          # injected host faults (traffic.host_faults)
        # (due, stripes) of all-reduce steps a straggler posts late
        self.deferred: list[tuple[float, list[tuple[Requester | NativeRequester, bytes,
                                                    str]]]] = []
        # a rank move (traffic.rankmove): what this rank does in it, the requesters it
        # re-pointed (they drain to the old host), the responders from the new host
        self.move: dict | None = None
        self.move_rejects: list[str] = []
        self._repoint: tuple[int, str] | None = None  # (iteration, new host) of the sender
        self._former: list[Requester | NativeRequester] = []
        self._extra_resp: list[Responder | NativeResponder] = []
        if isinstance(self.ep, Endpoint):
            self.ep.app_handler = self._app_command
        if faults is not None:
            faults.bind(self.ep.now())
        self.tracker: RankTracker | None = None
        if coll_log is not None:  # per-rank collective log (traffic.collog)
            self.tracker = RankTracker(
                coll_log, rank=plan.rank, comm=comm or f"{plan.pattern.value}-{plan.nranks}",
                op=plan.pattern.value, host=hosts[plan.rank], mono_now=self.ep.now(),
                steps_per_seq=self._ar.steps_per_iter if self._ar else 0)
            for f, req in zip(plan.send, self.requesters):
                self.tracker.add("send", req, f.peer)
            first = first_iter * self._ar.steps_per_iter if self._ar else 0
            for f, resp in zip(plan.recv, self.responders):
                self.tracker.add("recv", resp, f.peer, first)
        self.start_s = 0.0
        self.end_s: float | None = None
        self._stall0 = self._stall1 = 0.0  # loop stall seconds at start and end
        self._cpu0 = self._cpu1 = 0.0  # process CPU seconds at start and end
        self.late_start_s = 0.0

    def _qcfg(self, qpn: int, peer_qpn: int, peer: int) -> QpConfig:
        q = self.qp
        return QpConfig(qpn=qpn, peer_qpn=peer_qpn, peer_ip=self.hosts[peer], mode=q.mode,
                        mtu=q.mtu, rate_bps=q.rate_bps, window_pkts=q.window_pkts,
                        fec_k=q.fec_k, fec_m=q.fec_m, rto_min_s=q.rto_min_s, dscp=q.dscp,
                        cc=q.cc, dcqcn=q.dcqcn, hpcc=q.hpcc, path_loss=q.path_loss)

    # -- driving ---------------------------------------------------------------------
    def _feed(self, now: float) -> None:
        """Post the next messages of every QP, at most one per QP per call (but KV-cache).

        Why one: building a message (payload + per-packet ICRC) takes about 1 ms per
        256 KiB here, longer than the pacing bucket's burst allowance; posting all
        in-flight messages in one go starved the sender for several ms at the start.
        The loop calls this every iteration, so the in-flight count still fills at once.

        The payload of a QP's next message is built right after a post, while the
        window is full, not when a completion opens it: building took 0.5-8 ms on the
        loaded 2-core test bed, and a 20 ms, 100 Mbit/s path with two 256 KiB messages
        in flight has about 2 ms of the other message left to send when one completes;
        the rest of the build was link time lost.
        """
        burst = self.plan.pattern is Pattern.KVCACHE
        for i, (f, req) in enumerate(zip(self.plan.send, self.requesters)):
            while (self._posted[i] < len(f.sizes)
                   and self._posted[i] - req.counters.msgs_done < self.inflight):
                k = self._posted[i]
                ready = self._ready.pop(i, None)
                req.post_write(ready if ready is not None else self._payload(i, k), now=now)
                self._posted[i] += 1
                if not burst:
                    if k + 1 < len(f.sizes):
                        self._ready[i] = self._payload(i, k + 1)
                    break

    def _payload(self, i: int, k: int) -> bytes:
        """The bytes of message ``k`` of send flow ``i`` (the same in every run)."""
        f = self.plan.send[i]
        return message_bytes(self.seed, self.plan.rank, f.qpn, k, f.sizes[k])

    def done(self) -> bool:
        if (self._ar is not None and not self._ar.done) or self.deferred:
            return False
        if any(not r.idle for r in self._former):
            return False
        if self._ar is not None:  # every step arrived (a moved rank expects fewer)
            return all(r.idle for r in self.requesters)
        for i, (f, req) in enumerate(zip(self.plan.send, self.requesters)):
            if self._posted[i] < len(f.sizes) or not req.idle:
                return False
        return all(r.counters.msgs_done >= f.expect
                   for f, r in zip(self.plan.recv, self.responders))

    def run(self, *, timeout_s: float, start_at: float | None = None,
            linger_s: float | None = None, progress: TextIO | None = None,
            interval_s: float = 1.0, on_ready: Callable[[], None] | None = None,
            stop: Callable[[], bool] | None = None) -> dict:
        """Run to completion or timeout and return the summary (``finished`` says which).

        Ctrl-C / SIGTERM (as KeyboardInterrupt) end the run early with a summary marked
        ``interrupted``; the endpoint's sockets are closed in every case.  ``stop`` (the
        CLI's signal flag) is polled every loop iteration as well: a KeyboardInterrupt
        raised where Python swallows it (a finaliser) must not leave the rank running
        until its timeout.
        """
        self._stop = stop if stop is not None else (lambda: False)
        if linger_s is None:
            linger_s = self.default_linger_s()
        try:
            return self._run(timeout_s=timeout_s, start_at=start_at, linger_s=linger_s,
                             progress=progress, interval_s=interval_s, on_ready=on_ready)
        finally:
            self.ep.close()

    def _run(self, *, timeout_s: float, start_at: float | None, linger_s: float,
             progress: TextIO | None, interval_s: float,
             on_ready: Callable[[], None] | None) -> dict:
        self.late_start_s = 0.0
        self._cpu0 = self._cpu1 = time.process_time()
        interrupted = False
        try:
            if on_ready is not None:  # inside the try: a signal from now on is handled
                on_ready()
            # the first draw of numpy's generator costs ~8 ms: pay it before the clock runs
            message_bytes(self.seed, self.plan.rank, 0, 0, 64)
            if start_at is not None:
                wait = start_at - time.time()
                if wait < 0:  # peers may have sent before we bound: expect retransmissions
                    self.late_start_s = -wait
                    if progress is not None:
                        progress.write(f"rank {self.plan.rank}: started {-wait:.3f} s after "
                                       "--start-at\n")
                end_wait = self.ep.now() + max(0.0, wait)
                while self.ep.now() < end_wait and not self._stop():  # answer early peers
                    self.ep.step(min(0.01, max(0.0, end_wait - self.ep.now())))
            self.start_s = self.ep.now()
            self._cpu0 = time.process_time()  # every thread: the native engine's too
            self._stall0 = self.ep.counters.stall_s
            if self._ar is not None:
                self._ar.start(self.start_s)
            self._feed(self.start_s)
            next_progress = [self.start_s + interval_s]

            def tick(now: float) -> None:
                self._feed(now)
                if self.faults is not None:
                    self._apply_faults(now)
                if self.tracker is not None:
                    self.tracker.poll()
                if progress is not None and now >= next_progress[0]:
                    next_progress[0] = now + interval_s
                    progress.write(self.progress_line(now) + "\n")
                    progress.flush()

            finished = self.ep.run(lambda: self.done() or self._stop(), timeout_s=timeout_s,
                                   on_tick=tick)
            if self._stop():
                raise KeyboardInterrupt
            self.end_s = self.ep.now()
            self._cpu1 = time.process_time()
            self._stall1 = self.ep.counters.stall_s
            if finished and linger_s > 0:
                self._linger(quiet_s=linger_s, until=self.start_s + timeout_s)
        except KeyboardInterrupt:
            finished, interrupted = False, True
        if self.tracker is not None:
            self.tracker.finish()
            self.tracker.w.close()
        summary = self.summary(finished)
        summary["interrupted"] = interrupted
        return summary

    def default_linger_s(self) -> float:
        """How long a finished rank stays quiet before it leaves: a peer's largest RTO
        and a margin, or nothing when no peer sends to this rank."""
        if not self.responders:
            return 0.0
        return max(r.cfg.rto_max_s for r in self.responders) + 0.5

    def _linger(self, *, quiet_s: float, until: float) -> None:
        """Keep answering peers until none has sent anything for ``quiet_s``.

        Finishing here does not mean our peers have finished: the ACK of a message we
        completed can be lost, and the peer's retransmission comes one RTO later (up to
        ``rto_max_s``).  A rank that left at once would leave that peer retransmitting
        into nothing until its timeout, as an RC QP torn down too early would.  So we
        stay while peers still send, and leave after a quiet spell longer than their
        largest RTO, or at the run's own deadline.
        """
        last = [self.ep.now(), self.ep.counters.rx_pkts]

        def quiet() -> bool:
            now, rx = self.ep.now(), self.ep.counters.rx_pkts
            if rx != last[1]:
                last[0], last[1] = now, rx
            return now - last[0] >= quiet_s or now >= until or self._stop()

        self.ep.run(quiet, timeout_s=max(0.0, until - self.ep.now()) + quiet_s)

    # -- moving a rank to a spare host (traffic.rankmove) ----------------------------------
    def _app_command(self, cmd: ControlCommand, now: float) -> dict:
        """The workload's control commands: progress, and a rank move."""
        app = cmd.app or {}
        if app.get("cmd") == "collective":
            return {"collective": self.progress()}
        try:
            role = self.accept_move(int(app["rank"]), str(app["to"]), int(app["at_iter"]))
        except WorkloadError as e:
            self.move_rejects.append(str(e))
            return {"move_rank": {"status": "rejected", "rank": self.plan.rank,
                                  "error": str(e)}}
        return {"move_rank": {"status": "accepted", "rank": self.plan.rank, "role": role,
                              "iter": self._ar.iter if self._ar else None}}

    def progress(self) -> dict:
        """Where the workload is: the all-reduce iteration this rank works on."""
        ar = self._ar
        return {"rank": self.plan.rank, "host": self.hosts[self.plan.rank],
                "workload": self.plan.pattern.value,
                "iter": ar.iter if ar else None, "iterations": ar.iterations if ar else None,
                # how long its recent iterations took (a mover's margin is time, not steps)
                "iter_s": float(np.median(ar.iter_times[-5:])) if ar and ar.iter_times
                else None,
                "moving": self.move}

    def accept_move(self, rank: int, to: str, at_iter: int) -> str:
        """Take part in moving ``rank`` to host ``to`` from all-reduce iteration
        ``at_iter`` on; returns this rank's role, WorkloadError names what is wrong.

        moved: stop after iteration at_iter - 1.  sender (rank - 1): at the start of
        iteration at_iter, re-point the QPs to ``rank`` at ``to`` (fresh QPs; the old
        ones drain).  receiver (rank + 1): accept the same QP numbers from ``to`` now,
        as steps from at_iter on.  Any other rank only learns the new address.
        """
        ar, n = self._ar, self.plan.nranks
        where = f"move_rank of rank {rank} to {to} at iteration {at_iter}"
        if ar is None:
            raise WorkloadError(f"{where}: workload {self.plan.pattern.value} is not an "
                                "all-reduce")
        if not isinstance(self.ep, Endpoint):
            raise WorkloadError(f"{where}: the {self.engine} engine cannot re-point QPs "
                                "(the python engine can)")
        if not 0 <= rank < n:
            raise WorkloadError(f"{where}: rank {rank} outside the ring 0..{n - 1}")
        if to in self.hosts:
            raise WorkloadError(f"{where}: {to} is already the host of rank "
                                f"{self.hosts.index(to)}")
        if not 1 <= at_iter < ar.iterations:
            raise WorkloadError(f"{where}: iteration outside 1..{ar.iterations - 1} (the "
                                f"job has {ar.iterations})")
        if self.move is not None or self._repoint is not None:
            raise WorkloadError(f"{where}: a move is already under way ({self.move})")
        me = self.plan.rank
        roles = []
        if me == rank:
            roles.append("moved")
        if me == (rank - 1) % n:
            roles.append("sender")
        if me == (rank + 1) % n:
            roles.append("receiver")
        limit = at_iter + 1 if roles == ["receiver"] else at_iter
        if roles and ar.iter >= limit:  # the boundary is behind us: the move cannot be consistent
            raise WorkloadError(f"{where}: too late, rank {me} already works on iteration "
                                f"{ar.iter}")
        if "moved" in roles:
            ar.iterations = at_iter
        if "sender" in roles:
            self._repoint = (at_iter, to)
        if "receiver" in roles:
            first = at_iter * ar.steps_per_iter
            for f in self.plan.recv:
                self._extra_resp.append(self.ep.add_peer_responder(
                    f.qpn, to, on_message=ar.receiver(first)))
                if self.tracker is not None:
                    self.tracker.add("recv", self._extra_resp[-1], rank, first)
        self.hosts[rank] = to
        self.move = {"rank": rank, "to": to, "at_iter": at_iter,
                     "role": "+".join(roles) or "bystander"}
        return self.move["role"]

    def confirm_move(self, reply_to: str | bytes | None) -> None:
        """A standby became this rank (traffic.standby): record it, confirm it to the
        client that sent the move (on this endpoint's control socket, the same path)."""
        assert self._ar is not None
        self.move = {"rank": self.plan.rank, "to": self.hosts[self.plan.rank],
                     "at_iter": self._ar.first_iter, "role": "spare"}
        if isinstance(self.ep, Endpoint) and self.ep.control is not None:
            self.ep.control.reply(reply_to, {"move_rank": {
                "status": "accepted", "rank": self.plan.rank, "role": "spare",
                "iter": self._ar.iter}})

    def at_iteration(self, it: int, now: float) -> None:
        """Called as each all-reduce iteration starts: a sender re-points its QPs at
        the move's iteration (this iteration's steps go to the new host)."""
        if self._repoint is None or it < self._repoint[0]:
            return
        assert isinstance(self.ep, Endpoint)
        to = self._repoint[1]
        self._repoint = None
        for c, f in enumerate(self.plan.send):
            self._former.append(self.requesters[c])
            self.requesters[c] = self.ep.repoint_requester(f.qpn, to)
            if self.tracker is not None:   # its messages carry their step in their tags
                self.tracker.add("send", self.requesters[c], f.peer)

    def _apply_faults(self, now: float) -> None:
        """Injected host faults: receive delay of a slow host, deferred straggler steps."""
        assert self.faults is not None
        d = self.faults.rx_delay(now)
        if d != self.ep.cfg.delay_s:
            self.ep.set_rx_delay(d)
        while self.deferred and self.deferred[0][0] <= now and self._ar is not None:
            _, parts = self.deferred.pop(0)
            self._ar.post(parts, now)

    def progress_line(self, now: float) -> str:
        el = max(1e-9, now - self.start_s)
        acked = sum(r.counters.acked_bytes for r in self.requesters)
        deliv = sum(r.counters.delivered_bytes for r in self.responders)
        retx = sum(r.counters.retx_pkts for r in self.requesters)
        done = sum(r.counters.msgs_done for r in self.requesters) + sum(
            r.counters.msgs_done for r in self.responders)
        total = sum(len(f.sizes) for f in self.plan.send) + sum(f.expect for f in self.plan.recv)
        if self._ar is not None:
            total += 2 * (self.plan.nranks - 1) * self._ar.iterations
        return (f"{el:7.2f}s r{self.plan.rank} tx {acked * 8 / el / 1e6:8.2f} Mb/s "
                f"rx {deliv * 8 / el / 1e6:8.2f} Mb/s retx {retx:6d} msgs {done}/{total}")[:79]

    # -- reporting -------------------------------------------------------------------
    def cc_summary(self) -> dict:
        """The senders' own rate control: mode, CNPs received, DCQCN cuts, final rates."""
        reqs = self.requesters
        out: dict = {"mode": self.qp.cc,
                     "cnps_rx": sum(r.counters.cnps_rx for r in reqs),
                     "final_rate_bps": {str(r.qpn): r.cfg.rate_bps for r in reqs}}
        rps = [r.dcqcn for r in reqs if r.dcqcn is not None]
        if rps:
            out.update(cnps_applied=sum(rp.cnps_applied for rp in rps),
                       rate_cuts=sum(rp.rate_cuts for rp in rps),
                       min_rate_bps=min(rp.min_rate_seen_bps for rp in rps))
        hps = [r for r in reqs if isinstance(r.cc, HpccSender)]
        if hps:
            senders = [r.cc for r in hps if isinstance(r.cc, HpccSender)]
            reactions = [s.reaction_s for s in senders if s.reaction_s is not None]
            out.update(echo_acks=sum(r.counters.echo_acks for r in hps),
                       rate_cuts=sum(1 for r in hps for a, b in zip(r.rate_log, r.rate_log[1:])
                                     if b[1] < a[1]),
                       min_rate_bps=min(min(x[1] for x in r.rate_log) for r in hps),
                       reaction_s=reactions,
                       hpcc={str(r.qpn): r.snapshot()["hpcc"] for r in hps})
        return out

    def summary(self, finished: bool) -> dict:
        end = self.end_s if self.end_s is not None else self.ep.now()
        el = max(1e-9, end - self.start_s)
        sent = sum(sum(f.sizes) for f in self.plan.send)
        recvd = sum(r.counters.delivered_bytes for r in self.responders)
        msgs = []
        for f, req in zip(self.plan.send, self.requesters):
            msgs += [{"dir": "tx", "qpn": f.qpn, "peer": f.peer, "msg_id": m.msg_id,
                      "size": m.size, "posted_s": m.posted_s,
                      "fct_s": m.fct_s, "crc32": m.crc32, "tag": m.tag,
                      "retx_pkts": m.retx_pkts,
                      **({"recovery": m.extra["recovery"]} if "recovery" in m.extra else {}),
                      "goodput_bps": m.size * 8 / m.fct_s if m.fct_s else None}
                     for m in req.messages]
        for f, resp in zip(self.plan.recv, self.responders):
            msgs += [{"dir": "rx", "qpn": f.qpn, "peer": f.peer, "msg_id": m.msg_id,
                      "size": m.size, "done_s": m.done_s, "crc32": m.crc32,
                      "fec_repaired": m.fec_repaired}
                     for m in resp.messages]
        fcts = [float(m["fct_s"]) for m in msgs
                if m["dir"] == "tx" and m["fct_s"] is not None]
        out = {
            "workload": self.plan.pattern.value, "rank": self.plan.rank,
            "engine": self.engine,
            # the erasure code the endpoint codes FEC with (traffic.fec_codec)
            "fec_codec": fec_codec.name() if self.engine == "python" else "isa-l",
            # CPU seconds of this process (all threads) from start to end of the run
            "cpu_s": (self._cpu1 if self.end_s is not None else time.process_time())
            - self._cpu0,
            "nranks": self.plan.nranks, "hosts": self.hosts, "finished": finished,
            "qp_params": {k: (v.value if isinstance(v, Reliability) else v)
                          for k, v in asdict(self.qp).items()},
            "cc": self.cc_summary(),
            "start_s": self.start_s, "end_s": end, "completion_s": el,
            "late_start_s": self.late_start_s,
            # event-loop iterations > 2 ms late during the run (see EndpointCounters)
            "stall_s": (self._stall1 if self.end_s is not None else self.ep.counters.stall_s)
            - self._stall0,
            "bytes_sent": sent if self._ar is None else sum(
                r.counters.acked_bytes for r in [*self.requesters, *self._former]),
            "bytes_received": recvd,
            "goodput_tx_bps": sum(r.counters.acked_bytes for r in self.requesters) * 8 / el,
            "goodput_rx_bps": recvd * 8 / el,
            "fct_s": {"n": len(fcts),
                      "mean": float(np.mean(fcts)) if fcts else None,
                      "p50": float(np.percentile(fcts, 50)) if fcts else None,
                      "p99": float(np.percentile(fcts, 99)) if fcts else None},
            "messages": msgs,
            "endpoint": self.ep.stats(),
        }
        if self._ar is not None:
            # with the rank move this rank took part in, and the move commands it refused
            out["collective"] = {**self._ar.summary(self.allreduce_bytes), "move": self.move,
                                 "move_rejects": self.move_rejects}
        else:
            bad = self.bad_messages()
            out["collective"] = {"completion_s": el,
                                 "algbw_bps": (sent + recvd) * 8 / el,
                                 # no verdict (None) unless every message arrived
                                 "result_ok": (not bad) if finished else None,
                                 "bad_messages": bad[:16]}
        return out

    def bad_messages(self) -> list[dict]:
        """Received messages whose CRC-32 differs from what the peer sent: the peer's
        payload is regenerated from (seed, peer rank, QP, index), as the peer built it."""
        bad = []
        for f, resp in zip(self.plan.recv, self.responders):
            for k, m in enumerate(resp.messages):
                want = zlib.crc32(message_bytes(self.seed, f.peer, f.qpn, k, m.size))
                if m.crc32 != want:
                    bad.append({"qpn": f.qpn, "peer": f.peer, "index": k, "size": m.size,
                                "crc32": m.crc32, "expected_crc32": want})
        return bad
