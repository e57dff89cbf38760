"""The running controller: switches programmed and kept in sync, telemetry collected,
HPCC rates and loss maps computed, feedback sent, everything exported and shown.

Why one object owning every thread: start-up order matters (switches first, then the
collector and its listeners, then the periodic work) and so does shutdown (stop the
producers, flush the exporter, close the switches); `Controller.start()` /
`Controller.stop()` do both in one place, and each part stays in its own package.

Periodic work (every `status_interval_s`): retry switches that were unreachable,
poll link counters and drain loss digests, export rates and link losses, and rewrite
the state file `show` reads.
"""
from __future__ import annotations

import ipaddress
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller.alerts import AlertEngine
from controller.cc import (
    FLAG_PATH_CHANGED,
    FLAG_RETRANSMIT,
    FeedbackSender,
    FeedbackTarget,
    HpccLoop,
    fec_to_wire,
)
from controller.cc.engines import make_engine
from controller.diagnose.live import LiveDiagnosis
from controller.export.credentials import Credentials, load_credentials
from controller.export.errors import ExportError
from controller.export.runner import CollectorExport, InfluxTarget, open_exporter
from controller.export.schema import link_loss_lines, mitigation_lines, rate_lines
from controller.int.collector import Collector, CollectorConfig, Listener
from controller.int.errors import CollectorError
from controller.int.shards import CollectorShards
from controller.intent import IntentError, IntentOptions, WatchRule, compute_intent
from controller.lossmap.listener import FlowLossListener
from controller.lossmap.report import lossmap_section
from controller.lossmap.stream import FlowLossStream
from controller.mitigate import (
    GrayLossRule,
    Guard,
    Job,
    JobError,
    MitigationMode,
    Mitigator,
    SilenceRule,
    findings_from_diagnosis,
    findings_from_link_loss,
    findings_from_silence,
)
from controller.p4rt import (
    ArbitrationError,
    ConnectError,
    Fleet,
    ManagedSwitch,
    P4rtError,
    Phase,
    PipelineConfig,
    Progress,
    SyncReport,
    TlsOptions,
    load_pipeline,
)
from controller.topology import Topology, TopologyError, directed_links, load_topology
from formats.int_md import INS_HOP_LATENCY

from .auth import ControllerAuth
from .config import RunConfig
from .errors import RunError
from .fec import choose_flow_fec, flow_paths, link_rows_by_switch_pair
from .links import LinkPoller
from .rtt import flow_base_rtt_s
from .state import STATE_VERSION, write_state

LOG = logging.getLogger("controller.runner")

R_RX_EXPECTED = "SwitchIngress.link_rx_expected"
R_TX_SEQ = "SwitchEgress.link_tx_seq"
MITIGATION_FEC_RESIDUAL = 1e-4   # what a mitigation's "raise FEC" aims for without --fec-target


def _export_keys(exporter: Any) -> dict[str, Any]:
    """The exporter's delivery counters and queue depths for the state file's
    ``collector`` section (a soak compares them with what the server holds)."""
    st = exporter.stats
    out: dict[str, Any] = {
        "export_lines_written": st.lines_written, "export_lines_delivered": st.lines_delivered,
        "export_lines_rejected": st.lines_rejected, "export_send_failures": st.send_failures,
        "export_delivered_by_measurement": dict(st.delivered_by_measurement)}
    out.update({f"export_{k}": v for k, v in exporter.queue_stats().items()})
    return out


@dataclass(slots=True, kw_only=True)
class SwitchStatus:
    phase: Phase = Phase.CONNECTING
    error: str = ""
    error_kind: str = ""
    next_retry_s: float = 0.0
    retry_delay_s: float = 0.5


@dataclass(slots=True, kw_only=True)
class Controller:
    """See the module docstring.  `progress` gets one event per switch phase change."""

    cfg: RunConfig
    progress: Callable[[Progress], None] = lambda _p: None
    topo: Topology = field(init=False)
    pipeline: PipelineConfig = field(init=False)
    fleet: Fleet = field(init=False)
    status: dict[str, SwitchStatus] = field(default_factory=dict)
    restores: dict[str, int] = field(default_factory=dict)   # restarts seen and restored, per switch
    collector: Collector | CollectorShards | None = None
    exporter: Any = None
    export: CollectorExport | None = None
    hpcc: HpccLoop | None = None
    flow_loss: FlowLossListener | None = None
    links: LinkPoller | None = None
    live: LiveDiagnosis | None = None      # live fault diagnosis (--coll-log)
    mitigator: Mitigator | None = None     # --mitigate advise|act
    tick_s: dict[str, float] = field(default_factory=dict)   # the last round's phases (s)
    intent_options: IntentOptions | None = None
    _loss_exported_ns: int = 0
    fec_records: int = 0
    alerts: AlertEngine = field(init=False)
    web: Any = None                        # controller.web.WebServer with --web
    latest: dict[str, Any] | None = None   # the last snapshot written (the page reads it)
    _fec_by_slot: dict[int, tuple[int, int]] = field(default_factory=dict)
    _rtt_cache: dict[tuple[str, str], float] = field(default_factory=dict)   # (src host, dst ip) -> T
    _stopped: bool | None = None           # stop()'s result once it has run
    _fb_lock: threading.Lock = field(default_factory=threading.Lock)
    _clear_requested: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ start
    def load(self) -> None:
        """Topology, pipeline and intent; any problem is a RunError naming the file."""
        c = self.cfg
        try:
            self.topo = load_topology(c.topology)
        except (TopologyError, OSError) as exc:
            raise RunError(f"topology {c.topology}: {exc}") from None
        try:
            self.pipeline = load_pipeline(target=c.target, program=c.program, p4info=c.p4info,
                                          bmv2_json=c.bmv2_json)
        except P4rtError as exc:
            raise RunError(str(exc)) from None
        for h in c.agents:
            if h not in self.topo.host_names:
                raise RunError(f"--agent {h}=...: no host {h!r} in topology {c.topology} "
                               f"(hosts: {self.topo.host_names})")
        try:
            opts = IntentOptions(sink_mode=c.sink_mode, collector=c.collector_spec(),
                                 standby_collectors=c.standby_specs(),
                                 report_switch_ip_base=c.report_source_base,
                                 watch=(WatchRule(instruction_bitmap=c.int_instructions),),
                                 ecn=c.ecn)
        except IntentError as exc:
            raise RunError(str(exc)) from None
        self.intent_options = opts
        try:
            desired = compute_intent(self.topo, opts)
        except (IntentError, TopologyError) as exc:
            raise RunError(f"topology {c.topology}: {exc}") from None
        tls = None
        if c.tls_ca:
            try:
                tls = TlsOptions.from_files(c.tls_ca, c.tls_cert, c.tls_key, c.tls_server_name)
            except P4rtError as exc:
                raise RunError(str(exc)) from None
        switches = []
        for sw in self.topo.switches:
            sw_tls = tls
            if sw.tls is not None:   # the topology's TLS for this switch, our client certificate
                try:
                    sw_tls = TlsOptions.from_files(sw.tls.ca, c.tls_cert, c.tls_key,
                                                   sw.tls.server_name or c.tls_server_name)
                except P4rtError as exc:
                    raise RunError(f"switch {sw.name}: {exc}") from None
            switches.append(ManagedSwitch(name=sw.name, address=sw.grpc_addr, device_id=sw.device_id,
                                          pipeline=self.pipeline, desired=desired[sw.name],
                                          election_id=c.election_id, timeout_s=c.connect_timeout_s,
                                          tls=sw_tls,
                                          on_synced=self._on_synced))
            self.status[sw.name] = SwitchStatus()
        self.fleet = Fleet(switches)

    def _say(self, p: Progress) -> None:
        st = self.status.setdefault(p.switch, SwitchStatus())
        st.phase = p.phase
        if p.phase is Phase.FAILED:
            st.error, st.error_kind = p.message, p.error_kind
        elif p.phase is Phase.READY:
            st.error = st.error_kind = ""
        self.progress(p)

    def start(self) -> Controller:
        """Bring every switch up (failures are reported, not fatal), then start the
        collector, HPCC, loss maps, export and the periodic thread."""
        self.load()
        self.alerts = AlertEngine(rules=self.cfg.alert_rules)
        # a state file at once (every switch "connecting"): `controller show` answers
        # while slow or unreachable switches are still being tried
        self.write_state()
        self.fleet.bring_up(self._say)
        self._start_telemetry()
        self.links = LinkPoller(topo=self.topo, switches=self.fleet.switches, bin_s=self.cfg.loss_bin_s)
        self.links.enable_digests()
        self.links.poll()   # first counter sample: later polls count from here
        if self.cfg.coll_logs:
            self.live = LiveDiagnosis(topo=self.topo, out_dir=Path(self.cfg.out_dir),
                                      logs=[Path(x) for x in self.cfg.coll_logs],
                                      every_s=self.cfg.diagnose_every_s).start()
        if self.cfg.mitigate != "off":
            assert self.intent_options is not None
            try:
                job = Job.load(self.cfg.mitigate_job, self.topo) if self.cfg.mitigate_job else None
            except JobError as exc:
                raise RunError(f"--mitigate-job: {exc}") from None
            self.mitigator = Mitigator(topo=self.topo, options=self.intent_options, switches=self.fleet.switches,
                                       mode=MitigationMode(self.cfg.mitigate), job=job,
                                       guard=Guard(min_confidence=self.cfg.mitigate_min_confidence,
                                                   hold_down_s=self.cfg.mitigate_hold_down_s,
                                                   budget_per_min=self.cfg.mitigate_budget_per_min))
        self.write_state()
        if self.cfg.web is not None:
            from controller.web import WebServer, build_view
            topo = self.topo
            self.web = WebServer(host=self.cfg.web[0], port=self.cfg.web[1], token=self.cfg.web_token,
                                 view=lambda: build_view(self.latest or {}, topo, live=True),
                                 version=lambda: id(self.latest)).start()
        self._thread = threading.Thread(target=self._run, name="controller-run", daemon=True)
        self._thread.start()
        return self

    def _start_telemetry(self) -> None:
        c = self.cfg
        auth = ControllerAuth.from_config(c, self.topo)
        ccfg = CollectorConfig(host=c.listen, report_port=c.report_port, agent_port=c.agent_port,
                               flow_capacity=c.flow_capacity, keys=auth.keys,
                               # room for bursts of forgeries (kernel memory, not ours)
                               rcvbuf_bytes=(32 << 20) if auth.keys else 8 << 20,
                               report_sources=auth.report_sources)
        # with N collector processes, flow slots are process * flow_capacity + slot
        n_flows = c.flow_capacity * c.collectors
        eng = make_engine(c.cc, n_flows=n_flows, base_rtt_s=c.base_rtt_s)
        self.hpcc = HpccLoop(engine=eng, sender=FeedbackSender(
                                 n_flows=n_flows, signer=auth.feedback_signer,
                                 verifier=auth.confirm_verifier),
                             resolve=self._resolve, send_rates=c.rate_feedback)
        self.flow_loss = FlowLossListener(stream=FlowLossStream(
            n_flows=n_flows, bin_ns=int(c.loss_bin_s * 1e9), n_bins=300, origin_ns=time.time_ns()))
        listeners: list[Listener] = [self._cc_listener, self.flow_loss]
        try:
            if c.collectors > 1:   # the listeners run here, on the shards' dispatch thread
                self.collector = CollectorShards(ccfg, c.collectors, listeners=listeners,
                                                 cpus=c.collector_cpus).start()
            else:
                self.collector = Collector(ccfg, listeners=listeners).start()
        except (CollectorError, OSError) as exc:  # a port in use, a bad address, bad cores
            raise RunError(f"collector on {c.listen}:{c.report_port}/{c.agent_port}: {exc}") from None
        # agents' confirmations ("rate applied") wake the collector thread
        self.collector.add_reader(self.hpcc.sender.sock, self._on_confirmations)
        try:
            cred = load_credentials(c.influx_credentials) if c.influx else Credentials()
            self.exporter = open_exporter(c.influx, out_dir=c.out_dir, target=InfluxTarget(
                database=c.database, org=c.org, token=cred.token, username=cred.username,
                password=cred.password))
        except ExportError as exc:
            self.collector.stop()
            raise RunError(f"export: {exc}") from None
        self.export = CollectorExport(self.collector, self.exporter,
                                      interval_s=c.export_interval_s).start()

    def _cc_listener(self, batch: Any, flow_slots: np.ndarray) -> None:
        """HPCC on the collector thread; the lock keeps FEC feedback (controller thread)
        off the shared FeedbackSender meanwhile."""
        assert self.hpcc is not None
        with self._fb_lock:
            self.hpcc(batch, flow_slots)

    def _on_confirmations(self) -> None:
        """Agents' confirmations, on the collector thread (same lock as feedback)."""
        assert self.hpcc is not None
        with self._fb_lock:
            self.hpcc.poll_confirmations()

    def _send_fec(self) -> None:
        """FEC per active flow from the link loss map (with `fec_target_residual`, or
        while a mitigation raised FEC on a link every path of some flows crosses)."""
        target = self.cfg.fec_target_residual
        if not target and self.mitigator is not None and self.mitigator.fec_links():
            target = MITIGATION_FEC_RESIDUAL
        if not target or self.collector is None or self.hpcc is None \
                or self.links is None or not self.links.links:
            return
        f = self.collector.flow_snapshot()
        if not len(f.slot):
            return
        active = self.hpcc.engine.state.active[f.slot]
        if not active.any():
            return
        sel = np.flatnonzero(active)
        ids = {s.name: s.int_node_id for s in self.topo.switches}
        rows = link_rows_by_switch_pair(self.links.links, ids)
        paths = flow_paths(f.path_node[sel], f.hop_count[sel], rows)
        dec = choose_flow_fec(self.links.stream, paths, target_residual=target)
        k, m = fec_to_wire(dec.fec_k, dec.fec_m)
        for slot, kk, mm in zip(f.slot[sel].tolist(), dec.fec_k.tolist(), dec.fec_m.tolist(), strict=True):
            self._fec_by_slot[int(slot)] = (int(kk), int(mm))
        with self._fb_lock:
            self.fec_records += self.hpcc.sender.send_fec(f.slot[sel], k, m,
                                                          flags=np.where(dec.retransmit, FLAG_RETRANSMIT, 0))

    def _resolve(self, sample: np.ndarray) -> FeedbackTarget | None:
        """Feedback for a new flow goes to its sender's agent (`agents[host]`, else the
        source host address and `feedback_port`); flow_id is the flow's destination QP;
        the max rate is the sender's link rate, or `cfg.max_rate_bps` when lower (senders
        held below their links' rate on purpose: raised to it, they overran Python
        softswitches); HPCC's base RTT T is the flow's path
        round trip from the topology (`rtt.flow_base_rtt_s`), at least `cfg.base_rtt_s`.
        Senders outside the topology get none."""
        src = str(ipaddress.IPv4Address(int(sample["src_ip"])))
        host = next((h for h in self.topo.hosts if h.ipv4 == src), None)
        if host is None:
            return None
        rate_bps = next((ln.rate_mbps for ln in self.topo.links_of(host.name)), 1000.0) * 1e6
        if self.cfg.max_rate_bps is not None:
            rate_bps = min(rate_bps, self.cfg.max_rate_bps)
        agent = self.cfg.agents.get(host.name, (src, self.cfg.feedback_port))
        dst = str(ipaddress.IPv4Address(int(sample["dst_ip"])))
        rtt = self._rtt_cache.get((host.name, dst))
        if rtt is None:
            rtt = flow_base_rtt_s(self.topo, host.name, dst, floor_s=self.cfg.base_rtt_s)
            self._rtt_cache[(host.name, dst)] = rtt
        return FeedbackTarget(agent=agent, flow_id=int(sample["dest_qp"]), max_rate_bps=rate_bps,
                              base_rtt_s=rtt)

    def _on_synced(self, sw: ManagedSwitch, report: SyncReport) -> None:
        """A switch that got its pipeline again after its first sync restarted, and its
        link sequence state starts from 0: make both ends of each of its links agree
        (neighbours expect 0 from it, and send it 0 next), so no loss is counted."""
        if not report.pipeline_pushed or sw.syncs <= 1:
            return
        if self.links is not None:
            self.links.enable_digests([sw.name])
        LOG.warning("switch %s restarted: state restored (%s)", sw.name, report.summary())
        for d in directed_links(self.topo):
            if sw.name not in (d.src, d.dst):
                continue
            peer_name, port, reg_name, width = (d.dst, d.dst_port, R_RX_EXPECTED, 32) if d.src == sw.name \
                else (d.src, d.src_port, R_TX_SEQ, 32)
            peer = self.fleet.switches.get(peer_name)
            if peer is None or peer.client is None:
                continue
            try:
                peer.client.write_register(peer.schema.register(reg_name).id, port, 0, width)
            except P4rtError as exc:
                LOG.warning("switch %s: cannot reset %s[%d]: %s", peer_name, reg_name, port, exc)
                if reg_name == R_TX_SEQ and self.links is not None:
                    self._forgive_restart(sw.name, d.dst_port, peer, port)
        self.restores[sw.name] = self.restores.get(sw.name, 0) + 1

    def _forgive_restart(self, name: str, port: int, peer: ManagedSwitch, peer_port: int) -> None:
        """Where the neighbour's sequence register cannot be reset (BMv2), the restarted
        switch's first jump on that link is the restart: read where the neighbour's
        register stands where the target allows it (BMv2's server does not)."""
        assert self.links is not None and peer.client is not None
        sent: int | None
        try:
            sent = peer.client.read_register(peer.schema.register(R_TX_SEQ).id, peer_port).get(peer_port, 0)
        except P4rtError as exc:
            LOG.warning("switch %s: cannot read %s[%d]: %s", peer.name, R_TX_SEQ, peer_port, exc)
            sent = None
        self.links.forgive_restart(name, port, sent)
        LOG.warning("switch %s port %d: the first sequence jump after its restart (%s packets) is not "
                    "counted lost (%s keeps its sequence numbers)", name, port,
                    "unknown" if sent is None else sent, peer.name)

    # ------------------------------------------------------------------ periodic work
    def _run(self) -> None:
        # rounds start every status_interval_s (a round longer than that is followed by
        # the next at once): waiting the whole interval after each round made the link
        # poll's period the interval plus the round (0.5 s asked, ~1.5 s had)
        wait = self.cfg.status_interval_s
        while not self._stop.wait(wait):
            t0 = time.monotonic()
            try:
                self.tick()
            except Exception:
                LOG.exception("controller round failed")
            wait = max(0.05, self.cfg.status_interval_s - (time.monotonic() - t0))

    def tick(self) -> None:
        """One round: retry failed switches, poll links, export, write the state file."""
        t = [time.monotonic()]
        self._retry_failed()
        self._reclaim()
        t.append(time.monotonic())
        if self.links is not None:
            # the mitigation runs once the ingress ends are read (gray loss needs no
            # more), and again with the round's dead-link evidence after the egress reads
            self.links.poll(after_ingress=self._mitigate if self.mitigator is not None else None)
            t.append(time.monotonic())
            self._export_losses()
            self._mitigate()
            t.append(time.monotonic())
            self._send_fec()
        else:
            t += [t[-1], t[-1]]
        self._export_rates()
        t.append(time.monotonic())
        self.write_state()
        t.append(time.monotonic())
        # where a round's time goes (the state file's "tick", of the round before): the
        # mitigation's reaction is a poll period or two, so its period matters
        self.tick_s = {k: round(b - a, 4) for k, (a, b) in zip(
            ("switches", "poll", "losses_mitigate", "fec_rates", "state"), itertools.pairwise(t), strict=True)}

    def _retry_failed(self) -> None:
        now = time.monotonic()
        for name, st in self.status.items():
            if st.phase is not Phase.FAILED or now < st.next_retry_s \
                    or st.error_kind not in (ConnectError.__name__, ArbitrationError.__name__):
                continue
            sw = self.fleet.switches[name]
            sw.close()
            try:
                sw.connect()
                rep = sw.sync()
                self._say(Progress(switch=name, phase=Phase.READY, message=rep.summary()))
                if self.links is not None:
                    self.links.enable_digests([name])
            except P4rtError as exc:
                st.retry_delay_s = min(10.0, st.retry_delay_s * 2)
                st.next_retry_s = now + st.retry_delay_s
                st.error, st.error_kind = str(exc), type(exc).__name__

    def _reclaim(self) -> None:
        """Switches left without a primary (e.g. after p4runtime-shell with a higher
        election id disconnected) are taken back and re-synced."""
        for name, sw in self.fleet.switches.items():
            if self.status[name].phase is not Phase.READY:
                continue
            try:
                rep = sw.reclaim()
            except P4rtError as exc:
                LOG.warning("switch %s: reclaiming primary failed: %s", name, exc)
                continue
            if rep is not None:
                self._say(Progress(switch=name, phase=Phase.READY, message=f"primary again; {rep.summary()}"))

    def _export_losses(self) -> None:
        if self.exporter is None or self.links is None or not self.links.links:
            return
        m = self.links.stream.snapshot()
        bin_time = m.bins.start_ns + np.arange(m.bins.n_bins, dtype=np.int64) * m.bins.bin_ns
        # each bin once, when it has closed
        done = (bin_time >= self._loss_exported_ns) & (bin_time + m.bins.bin_ns <= time.time_ns())
        if not done.any():
            return
        self.exporter.write(link_loss_lines(links=[d.name for d in self.links.links], lost=m.lost[:, done],
                                            delivered=m.delivered[:, done], bin_time_ns=bin_time[done]))
        self._loss_exported_ns = int(bin_time[done][-1]) + m.bins.bin_ns

    def _mitigate(self, now: float | None = None) -> None:
        """Findings of this round (the live diagnosis' culprits, the link sequence
        counters' latest polls: gray loss and dead links) through the mitigation
        policy; its actions go to the export."""
        if self.mitigator is None:
            return
        findings = findings_from_diagnosis(self.live.snapshot() if self.live else None)
        healthy: dict[str, float] = {}
        if self.links is not None and self.links.links:
            healthy = self.links.healthy(time.time() if now is None else now)
            names = [d.name for d in self.links.links]
            # per poll, not per 1 s bin of the loss map: the rule weighs each poll's
            # packets, and the poll of this tick is judged at once
            starts, lost, delivered = self.links.loss_window()
            findings += findings_from_link_loss(names=names, lost=lost, delivered=delivered,
                                                interval_start_s=starts, rule=GrayLossRule(),
                                                recovering=self.links.recovering())
            since, _end, sent, arrived = self.links.silence()
            findings += findings_from_silence(names=names, sent=sent, arrived=arrived, since_s=since,
                                              rule=SilenceRule())
        acts = self.mitigator.step(findings, now, healthy, self._host_load())
        if self._clear_requested.is_set():
            self._clear_requested.clear()
            acts += self.mitigator.clear(now)
        self._notify_moved(acts)
        done = self.mitigator.take_unexported()
        if done and self.exporter is not None:
            self.exporter.write(mitigation_lines(done))

    def _host_load(self) -> dict[str, float]:
        """Per host of the job (ranks and spares): the flows the telemetry saw at it in
        the last 2 s (a rank move picks the least loaded spare)."""
        job = self.mitigator.job if self.mitigator is not None else None
        if job is None or self.collector is None:
            return {}
        f = self.collector.flow_snapshot()
        recent = f.last_update_ns >= time.time_ns() - 2_000_000_000
        out = {}
        for h, ip in job.ips.items():
            v = int(ipaddress.IPv4Address(ip))
            out[h] = float(np.count_nonzero(recent & ((f.src_ip == v) | (f.dst_ip == v))))
        return out

    def clear_mitigation(self) -> None:
        """An operator's word that the links and switches kept off were repaired: their
        actions are undone in the next round (``controller run``: SIGUSR1)."""
        self._clear_requested.set()

    def _notify_moved(self, acts: list[Any]) -> None:
        """After a reroute or drain was written: a path notice (``FLAG_PATH_CHANGED``)
        to every flow the feedback reaches, so a sender stalled on the avoided link
        resends now instead of at its backed-off timeout (``traffic.control``).

        Why every flow, not only those whose INT path crossed the link: INT shows the
        data's path, not its ACKs' (ECMP hashes each direction on its own), and a
        sender whose ACKs died on the link is as stalled; a notice to a sender that
        is not stalled only rearms its timer at the base value (no packet is sent)."""
        if self.hpcc is None or self.mitigator is None or not any(
                a.verb in ("reroute", "drain") and a.outcome == "written" for a in acts):
            return
        with self._fb_lock:
            rows = self.hpcc.sender.bound_flows()
            n = self.hpcc.sender.send_flags(rows, FLAG_PATH_CHANGED) if rows.size else 0
        self.mitigator.path_notices += n
        LOG.warning("mitigation: path notices to %d flow(s)", n)

    def _export_rates(self) -> None:
        if self.collector is None or self.hpcc is None or self.exporter is None:
            return
        f = self.collector.flow_snapshot()
        if not len(f.slot):
            return
        st = self.hpcc.engine.state
        active = st.active[f.slot]
        if not active.any():
            return
        sel = np.flatnonzero(active)
        self.exporter.write(rate_lines(src_ip=f.src_ip[sel], dst_ip=f.dst_ip[sel], sport=f.sport[sel],
                                       dest_qp=f.dest_qp[sel], rate_bps=st.rate_bps[f.slot[sel]],
                                       time_ns=time.time_ns()))

    # ------------------------------------------------------------------ state for `show`
    def snapshot(self) -> dict[str, Any]:
        names = {s.int_node_id: s.name for s in self.topo.switches}
        switches = []
        for name, sw in self.fleet.switches.items():
            st = self.status.get(name, SwitchStatus())
            c = sw.client
            node = self.topo.switch(name).int_node_id
            switches.append({
                "name": name, "address": sw.address, "device_id": sw.device_id, "node_id": node,
                "state": st.phase.value if st.phase is not Phase.READY or (c and c.connected)
                else "reconnecting",
                "primary": bool(c and c.is_primary), "role": c.role_state if c else "disconnected",
                "election_id": c.election_id if c else sw.election_id, "syncs": sw.syncs,
                "restores": self.restores.get(name, 0), "entries": len(sw.desired.entries),
                "last_sync": sw.last_sync.summary() if sw.last_sync else "",
                "error": st.error})
        flows: list[dict[str, Any]] = []
        hops: list[dict[str, Any]] = []
        coll: dict[str, Any] = {}
        if self.collector is not None:
            f = self.collector.flow_snapshot()
            rate = self.hpcc.engine.state.rate_bps if self.hpcc else None
            active = self.hpcc.engine.state.active if self.hpcc else None
            lost = self.flow_loss.stream.lost_total if self.flow_loss else None
            for i in range(len(f.slot)):
                s = int(f.slot[i])
                n = int(f.hop_count[i])
                # ACK directions: their PSNs are not data, so no loss of their own
                ack = self.flow_loss is not None and self.flow_loss.is_ack_direction(s)
                flows.append({
                    "kind": "ack" if ack else "data",
                    "src": str(ipaddress.IPv4Address(int(f.src_ip[i]))),
                    "dst": str(ipaddress.IPv4Address(int(f.dst_ip[i]))),
                    "sport": int(f.sport[i]), "qp": int(f.dest_qp[i]), "hops": n,
                    "path": [names.get(int(x), int(x)) for x in f.path_node[i][:n]],
                    "samples": int(f.samples[i]), "last_psn": int(f.last_psn[i]),
                    "rate_bps": float(rate[s]) if rate is not None and active is not None and active[s] else None,
                    "fec": list(self._fec_by_slot[s]) if s in self._fec_by_slot else None,
                    "lost": None if ack else int(lost[s]) if lost is not None else 0})
            h = self.collector.hop_snapshot()
            for i in range(len(h.slot)):
                tx = float(h.tx_rate_bps[i])
                line = float(h.line_rate_bps[i])
                hops.append({
                    "node_id": int(h.node_id[i]), "switch": names.get(int(h.node_id[i]), "?"),
                    "egress_port": int(h.egress_port[i]), "qlen_bytes": int(h.qlen_bytes[i]),
                    "qlen_pkts": int(h.qlen_pkts[i]),
                    "tx_rate_bps": None if np.isnan(tx) else tx, "line_rate_bps": line,
                    "utilisation": None if np.isnan(tx) or line <= 0 else tx / line,
                    # None ("-" in show hops): the watchlist's INT instructions do not
                    # ask the switches for it (the HPCC profile does not)
                    "hop_latency_ns": int(h.hop_latency_ns[i])
                    if self.cfg.int_instructions & INS_HOP_LATENCY else None,
                    "samples": int(h.samples[i])})
            cs = self.collector.stats()
            coll = {k: getattr(cs, k) for k in ("reports", "host_records", "reports_lost", "flows",
                                                "socket_drops", "listener_errors")
                    if hasattr(cs, k)}
            # the agents' shippers: batches lost on the way, records dropped in the agent
            coll["agent_batches"] = sum(a.batches for a in cs.agents)
            coll["agent_lost_batches"] = sum(a.lost_batches for a in cs.agents)
            coll["agent_dropped"] = sum(a.agent_dropped for a in cs.agents)
            coll["malformed"] = dict(getattr(cs, "malformed", {}) or {})
            coll["rejected"] = dict(cs.rejected)
        if self.hpcc is not None:
            coll["feedback_records"] = self.hpcc.stats.records_sent
            hs = self.hpcc.engine.stats()
            coll["hpcc_samples"] = hs.samples
            coll["hpcc_active_flows"] = hs.active_flows
            for key in ("telemetry_to_decision", "telemetry_to_sent", "decision_to_applied",
                        "telemetry_to_applied", "host_to_applied"):
                lat = getattr(hs, key)
                coll[f"loop_{key}_s"] = None if not lat.count else {
                    "count": lat.count, "p50": lat.p50_s, "p99": lat.p99_s, "max": lat.max_s}
            coll["loop_host_clock_mismatch"] = self.hpcc.engine.latency.clock_mismatch
            coll["fec_records"] = self.fec_records
            coll["feedback_confirmations"] = dict(self.hpcc.sender.stats.confirmations)
            if self.hpcc.sender.verifier is not None:
                coll["confirm_rejected"] = dict(self.hpcc.sender.verifier.stats.rejected)
            g = self.hpcc.gate.stats
            coll["hpcc_commit_gate"] = {"armed": g.armed, "held": g.held,
                                        "released_fresh": g.released_fresh,
                                        "timeouts": g.timeouts_confirm + g.timeouts_fresh}
        if self.exporter is not None:
            coll.update(_export_keys(self.exporter))
        return {"version": STATE_VERSION, "updated_unix_s": time.time(), "pid": os.getpid(),
                "running": not self._stop.is_set(),
                "topology": self.topo.name, "switches": switches, "flows": flows, "hops": hops,
                "losses": self.links.totals() if self.links else [], "collector": coll,
                "lossmap": lossmap_section(self.links.stream.snapshot(), [d.name for d in self.links.links],
                                           now_ns=time.time_ns())
                if self.links and self.links.links else None,
                "link_poll_errors": dict(self.links.errors) if self.links else {},
                "tick": dict(self.tick_s),
                "link_poll": self.links.timing() if self.links is not None else {},
                "diagnosis": self.live.snapshot() if self.live else None,
                "mitigation": self.mitigator.snapshot() if self.mitigator else None}

    def write_state(self) -> None:
        """Snapshot, alerts on it, the state file; the page serves this snapshot."""
        with self._lock:
            snap = self.snapshot()
            changed = self.alerts.evaluate(snap, now_unix_s=snap["updated_unix_s"])
            snap["alerts"] = self.alerts.snapshot()
            write_state(self.cfg.state_file, snap)
            self.latest = snap
        for a in changed:
            LOG.warning("alert %s %s: %s (value %.4g, threshold %.4g)", a.rule, a.state, a.subject,
                        a.value, a.threshold)
        if changed and self.exporter is not None:
            from controller.export.schema import alert_lines
            self.exporter.write(alert_lines([a.as_dict() for a in changed], time_ns=time.time_ns()))

    def _plot_losses(self) -> None:
        """OUT/link_loss_heatmap.png (links x time) when any link saw traffic."""
        if self.links is None or not self.links.links:
            return
        m = self.links.stream.snapshot()
        if not (m.lost + m.delivered).any():
            return
        try:
            from controller.lossmap.plots import plot_heatmap
            plot_heatmap(m, os.path.join(self.cfg.out_dir, "link_loss_heatmap.png"),
                         link_names=[d.name for d in self.links.links])
        except Exception:
            LOG.exception("link loss heat map not written")

    # ------------------------------------------------------------------ stop
    def stop(self) -> bool:
        """Stop everything; True when every exported line was delivered (or spooled).

        Idempotent: a signal handler and a `finally` may both call it; the second call
        returns the first one's result instead of exporting into a closed exporter."""
        if self._stopped is not None:
            return self._stopped
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.web is not None:
            self.web.stop()
        if self.live is not None:
            self.live.stop()
        if self.links is not None:
            self.links.close()
        delivered = True
        if self.export is not None:
            self.export.stop()
        if self.collector is not None:
            self.collector.stop()
        try:
            if self.status:
                self.write_state()
        except Exception:
            LOG.exception("final state write failed")
        self._plot_losses()
        if self.exporter is not None:
            delivered = bool(self.exporter.close(timeout_s=5))
            if self.status:  # the final flush happened after the state write above
                try:
                    self.write_state()
                except Exception:
                    LOG.exception("state write after the export flush failed")
        if hasattr(self, "fleet"):
            self.fleet.close()
        self._stopped = delivered
        return delivered
