"""``experiment faults --mitigate act`` and the ``recovery_faults`` preset: faults on
the two-DC test bed with the controller acting on them, against the same faults with
it only advising and against no fault.

``python -m mininet_topos experiment faults --mitigate act --switch ebpf --trials 3 --out DIR``

Why two test beds: whether the controller acts is fixed when it starts
(``--mitigate act`` / ``advise``), so the mitigated and the unmitigated trials run on
a test bed each, one after the other, with the same faults on the same links; each
bed's fault-free trials are its own baseline (ratios within one bed).  Each trial is
the fault harness' ring all-reduce (``harness._run_ranks``) with the fault at its
onset; its rank timeout is long enough for a run 3x slower than the warm-up on the
acting bed (2.2x on the advising one: past the issue's 2x an unmitigated run counts
as hung), so a slower run is measured, not cut.  Both faults are on leaf-spine
links; gray loss is the harness' eBPF dropper at the sending switch port
(`_FabricGrayLoss`).  Between trials the harness, which healed the fault,
tells the controller so (``SIGUSR1``: an operator's "repaired"; the controller undoes
nothing on the mere absence of evidence, and a link its routes keep off shows none)
and waits until the reroute is undone, so every trial starts on the fault-free routes.  A flapping link (down, up, down ... from the
onset) counts how often the controller acts on it against what its hold-down allows.
The figures are ``recovery.py``'s; ``summary.json["mitigation"]`` holds the rows.

Host kinds (``straggler``, ``slow_receiver``): the rank injects the fault into itself
(``--fault-straggle`` / ``--fault-slow-rx``); a standby rank waits on each spare host
(``spares``, the idle host of each rank's leaf), the controller diagnoses the running
trial's collective logs (``live``, a link to them) and may move the rank to a spare
(``--mitigate-job``: the job file this bed writes); the row has the move and every
rank's data check (the spare's included), read from their last output lines.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from controller.topology import LinkRole, Topology, directed_links
from mininet_topos.faults import recovery as rec
from mininet_topos.faults.harness import (
    LOSS_EXPORT_WAIT_S,
    HarnessConfig,
    _evaluate,
    _run_ranks,
    _warm_transfer_s,
    host_fault_scale,
)
from mininet_topos.faults.inject import Injector
from mininet_topos.faults.p4 import (
    controller_telemetry,
    int_crossings,
    int_places,
    wait_for_loss_export,
)
from mininet_topos.faults.spec import FaultError, FaultSpec
from mininet_topos.preset_kind import spec_kind
from mininet_topos.testbed.errors import ExperimentError
from traffic.collog import read_logs

__all__ = ["RecoveryConfig", "is_mitigation_spec", "load_recovery_spec", "run_recovery"]

KINDS = ("gray_loss", "link_down")
HOST_KINDS = ("slow_receiver", "straggler")   # the rank is moved to a spare host
SLOWDOWN_ROOM = 3.0     # a trial's ranks may take this many times the warm-up's job
# ... on the advising bed: an unmitigated run is measured up to 2.2x (the mark
# is 2x: a run cut there counts as "hung", a null ratio), not left to hang 3x long
SLOWDOWN_ROOM_UNMITIGATED = 2.2
WARM_S = 60.0           # the fault-free warm-up's limit


@dataclass(slots=True, kw_only=True)
class RecoveryConfig:
    out: Path = Path("results/recovery_faults")
    switch: str = "ebpf"
    seeds: tuple[int, ...] = (1, 2, 3)
    kinds: tuple[str, ...] = KINDS
    loss: float = 0.05              # gray loss
    fault_free: int = 10            # fault-free trials on the acting bed (at most 3 on the other)
    flap: bool = True               # one flapping-link trial on the acting bed
    flap_period_s: float = 1.5      # down this long, up this long, ...
    onset_s: float = 2.0
    allreduces: int = 12            # the job: this many all-reduces of 1 MB (~14 s fault-free)
    hold_down_s: float = 10.0       # the controller's --mitigate-hold-down
    poll_s: float = 0.5             # the controller's --interval: a dead link is named after 2 polls
    # the ranks' loss recovery: go-back-N, as RoCE NICs recover (selective repeat, the
    # traffic default, shrugs off 5 % loss: 1.14x the fault-free job, nothing to mitigate)
    recovery: str = "gbn"
    beds: tuple[str, ...] = ("act", "advise")   # "act" alone: no unmitigated comparison
    # host kinds: the spare hosts (a standby rank each, the same leaves as the ranks),
    # each step of a straggler this late, a slow receiver's hold (x the target's scale)
    spares: tuple[str, ...] = ("h2", "h4", "h6", "h8")
    late_s: float = 0.3
    slow_rx_s: float = 0.3
    # the ranks' QPs: per-QP rate and QPs per ring pair (the harness' own: 8M x 2).  A
    # QP's window (its rate x the path's RTT) is what go-back-N resends per loss: one
    # 16 Mbit/s QP has ~40 packets in flight across the WAN (two at 8: ~20, and a 5 %
    # gray loss cost 1.78-1.99x, short of a NIC's collapse at line rate)
    rate: str = "16M"
    qps: int = 1
    # the harness' ring (its count: ``allreduces``); the warm-up may take WARM_S, later
    # trials 3x its job (2.2x unmitigated)
    harness: HarnessConfig = field(default_factory=HarnessConfig)


def is_mitigation_spec(path: Path) -> bool:
    return spec_kind(path) == "mitigation_faults"


def load_recovery_spec(path: Path, out: Path) -> RecoveryConfig:
    """A ``kind: mitigation_faults`` preset (``presets/recovery_faults.yaml``)."""
    obj = yaml.safe_load(path.read_text())
    if not isinstance(obj, dict):
        raise FaultError(f"{path}: expected a mapping")
    obj = {k: v for k, v in obj.items() if k not in ("kind", "description", "name")}
    known = {"switch", "seeds", "kinds", "loss", "fault_free", "flap", "flap_period_s",
             "onset_s", "hold_down_s", "poll_s", "beds", "recovery", "allreduces", "spares",
             "late_s", "slow_rx_s", "rate", "qps"}
    unknown = set(obj) - known
    if unknown:
        raise FaultError(f"{path}: unknown keys {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(known))})")
    for k in ("seeds", "kinds", "beds", "spares"):
        if k in obj:
            obj[k] = tuple(obj[k])
    if "rate" in obj:   # checked by the ranks' own --rate parser, as they will read it
        from traffic.errors import ConfigError
        from traffic.workloads import parse_rate
        obj["rate"] = str(obj["rate"])
        try:
            parse_rate(obj["rate"])
        except ConfigError as exc:
            raise FaultError(f"{path}: {exc} (a per-QP rate such as 16M)") from None
    if "qps" in obj and (not isinstance(obj["qps"], int) or isinstance(obj["qps"], bool)
                         or not 1 <= obj["qps"] <= 16):
        raise FaultError(f"{path}: qps {obj['qps']!r}: QPs per ring pair, 1-16")
    bad = set(obj.get("kinds", ())) - set(KINDS) - set(HOST_KINDS)
    if bad:
        raise FaultError(f"{path}: kinds {', '.join(sorted(bad))}: only "
                         f"{', '.join(KINDS + HOST_KINDS)}")
    bad = set(obj.get("beds", ())) - {"act", "advise"}
    if bad or "beds" in obj and not obj["beds"]:
        raise FaultError(f"{path}: beds {', '.join(sorted(bad)) or '(none)'}: act and/or advise")
    try:
        return RecoveryConfig(out=out, **obj)
    except TypeError as exc:
        raise FaultError(f"{path}: {exc}") from None


class _Flapper:
    """An `Injector` whose link down comes and goes every ``period_s`` after its onset
    (the eBPF droppers' loss set to 1, then 0, ... by a thread until ``heal``)."""

    def __init__(self, inj: Injector, period_s: float) -> None:
        self.inj, self.period_s = inj, period_s
        self._ems: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started: float | None = None

    def arm(self, f: FaultSpec) -> None:
        self.inj.arm(f)
        self._ems = list(self.inj._armed)   # the droppers, attached with loss off

    def prepare(self, f: FaultSpec, onset_unix: float) -> None:
        self.inj.prepare(f, onset_unix)

    def apply(self, f: FaultSpec) -> None:
        self.inj.apply(f)
        self.started = time.time()
        self._thread = threading.Thread(target=self._flap, daemon=True)
        self._thread.start()

    def _flap(self) -> None:
        down = True
        while not self._stop.wait(self.period_s):
            down = not down
            for em in self._ems:
                em.set_bernoulli(1.0 if down else 0.0)

    def heal(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.inj.heal()


class _FabricGrayLoss:
    """Gray loss on one direction of a switch-to-switch link: the harness' eBPF dropper
    (the one a link down uses) at tc egress of the sending switch's port, dropping the
    share asked for.  The switch stamped its link sequence number before tc egress, so
    the sender counts the packet sent and the receiver sees a sequence gap: silent
    loss, as on a gray cable.  Why here, not in the harness' `Injector`: it makes
    silent loss on WAN delay lines only (between kernel routers a frame is counted
    before any hook can drop it); only this experiment needs it on P4 switches' links."""

    def __init__(self, inj: Injector) -> None:
        self.inj = inj
        self._em: Any = None

    def arm(self, f: FaultSpec) -> None:
        if self._em is None:
            a, ap, _b, _bp = self.inj._ends(f.target)
            self._em = self.inj._emulator(f"{a}-eth{ap}", self.inj._netns_of(a), f)

    def prepare(self, f: FaultSpec, onset_unix: float) -> None:
        self.arm(f)

    def apply(self, f: FaultSpec) -> None:
        self.arm(f)
        self._em.set_bernoulli(f.loss)
        self.inj.applied.append({"kind": f.kind, "target": f.target})

    def heal(self) -> None:
        self.inj.heal()


def _link_of(topo: Topology, direction: str) -> str:
    return next(d.link for d in directed_links(topo) if d.name == direction)


def _reverse(direction: str) -> str:
    a, _, b = direction.partition("->")
    return f"{b}->{a}"


def pick_targets(topo: Topology, places: dict[str, list[str]], seeds: tuple[int, ...],
                 kinds: tuple[str, ...], crossings: dict[str, list[str]] | None = None
                 ) -> dict[tuple[str, int], str]:
    """Per (kind, seed), a leaf-spine fabric direction the warm-up's INT paths cross
    (the issue's targets are for fabric links), drawn per kind and seed.

    Gray loss is drawn among the fabric directions that carry a cross-DC pair's data
    (``crossings``: the INT paths' direction -> ring pairs; a pair whose path crosses a
    WAN link): there the ring's QPs have a window in flight (the WAN's 20 ms at the
    preset's 16 Mbit/s: ~40 packets), as a RoCE QP at a datacenter NIC's line rate has,
    and go-back-N resends it for every loss.  On an intra-DC pair the bed's QPs have one
    or two packets in flight and a 5 % loss cost 1.13-1.27x: not the issue's scenario
    (a NIC at 100 Gbit/s has a window of a hundred packets on any fabric path)."""
    wan = {ln.name for ln in topo.links if ln.role is LinkRole.WAN}
    fabric = [x for x in places.get("link_down") or [] if _link_of(topo, x) not in wan]
    far: list[str] = []
    if crossings:
        directions = {d.name for d in directed_links(topo)}
        cross_dc = {p for x, ps in crossings.items()
                    if x in directions and _link_of(topo, x) in wan for p in ps}
        far = [x for x in fabric if set(crossings.get(x) or ()) & cross_dc]
    out = {}
    for kind in kinds:
        if kind in HOST_KINDS:   # a rank (straggler) or a receiving host, by seed
            hosts = places.get(kind) or []
            if not hosts:
                raise FaultError(f"recovery: no place for {kind} in the warm-up's INT paths")
            for s in seeds:
                out[(kind, s)] = hosts[int(np.random.default_rng([s, 7]).integers(len(hosts)))]
            continue
        pool = far if kind == "gray_loss" and far else fabric
        if not pool:
            raise FaultError(f"recovery: the warm-up's INT paths cross no fabric link for {kind}")
        for s in seeds:
            rng = np.random.default_rng([s, KINDS.index(kind)])
            out[(kind, s)] = pool[int(rng.integers(len(pool)))]
    return out


class _Bed:
    """One test bed (mitigation ``mode``) and its trials."""

    def __init__(self, cfg: RecoveryConfig, mode: str, topo: Topology, log: Any) -> None:
        self.cfg, self.mode, self.topo, self.log = cfg, mode, topo, log
        self.dir = Path(cfg.out) / mode
        moves = bool(set(cfg.kinds) & set(HOST_KINDS))
        self.hcfg = replace(cfg.harness, switch=cfg.switch, out=self.dir, trial_s=WARM_S,
                            rate=cfg.rate, qps=cfg.qps,
                            mode=cfg.recovery, count=cfg.allreduces, control=True,
                            spares=cfg.spares if moves else ())
        # host kinds: the controller diagnoses the running trial's collective logs (the
        # link ``live`` points at them) and may move a rank (the job file: ranks,
        # spares, their control sockets, links to the test bed's socket folder)
        self.live = self.dir / "live"
        self.job = self.dir / "job.json"
        self.controller_args: tuple[str, ...] = ()
        if moves:
            ctl = self.dir / "ctl"
            ctl.mkdir(parents=True, exist_ok=True)
            hosts = [*self.hcfg.hosts, *self.hcfg.spares]
            self.job.write_text(json.dumps({"ranks": list(self.hcfg.hosts),
                                            "spares": list(self.hcfg.spares),
                                            "controls": {h: str(ctl / f"{h}.sock") for h in hosts}}))
            self.controller_args = ("--coll-log", str(self.live), "--mitigate-job", str(self.job))
        self.tb: Any = None
        self.warm_sends = 0
        self.places: dict[str, list[str]] = {}
        self.crossings: dict[str, list[str]] = {}   # INT: direction -> ring pairs crossing it
        self.scale = 1.0    # a slow receiver's hold scales with the warm-up's transfers

    def _wan(self, direction: str) -> bool:
        return _link_of(self.topo, direction) in {ln.name for ln in self.topo.links
                                                   if ln.role is LinkRole.WAN}

    def state(self) -> dict[str, Any]:
        try:
            obj = json.loads((self.tb.logs / "controller" / "controller_state.json").read_text())
        except (OSError, ValueError):
            return {}
        return dict(obj.get("mitigation") or {})

    def clear(self) -> None:
        """The operator's word that the fault was repaired (the harness healed it at the
        end of the trial): ``SIGUSR1`` to the controller, which undoes its actions.  A
        link its routes keep off carries no traffic, so no counter can show it healed,
        and the controller undoes nothing without such evidence."""
        p = next((x for x in self.tb.processes if x.name == "controller"), None)
        if p is not None and p.proc.poll() is None:
            os.kill(p.proc.pid, signal.SIGUSR1)

    def wait_unavoided(self, timeout_s: float) -> float:
        """Clear, then wait (bounded) until the controller holds no reroute; the seconds
        waited."""
        t0 = time.monotonic()
        if self.state().get("active"):
            self.clear()
        while time.monotonic() - t0 < timeout_s:
            m = self.state()
            if not m.get("avoided") and not m.get("written_avoid"):
                break
            time.sleep(0.5)
        return time.monotonic() - t0

    def link_sockets(self) -> None:
        """The job file's control sockets: links to the test bed's (made at its start)."""
        sock_dir = getattr(self.tb, "sock_dir", None)
        if not self.controller_args or sock_dir is None:
            return
        for h in [*self.hcfg.hosts, *self.hcfg.spares]:
            link = self.dir / "ctl" / f"{h}.sock"
            link.unlink(missing_ok=True)
            link.symlink_to(sock_dir / f"{h}.sock")

    def point_live(self, trial_dir: Path) -> None:
        """The controller's diagnosis reads this trial's collective logs from now on."""
        tmp = self.dir / "live.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(trial_dir / "collectives")
        os.replace(tmp, self.live)

    def warm_up(self) -> None:
        self.point_live(self.dir / "warmup")
        start, end = _run_ranks(self.tb, self.hcfg, self.topo, self.dir / "warmup", None, None)
        recs = read_logs([self.dir / "warmup" / "collectives"])
        done = rec.completion_s(recs, start)
        if done is None:
            raise FaultError(f"recovery ({self.mode}): the fault-free warm-up did not complete "
                             f"in {self.hcfg.trial_s:g} s; see {self.dir / 'warmup'}")
        self.warm_sends = sum(1 for r in recs if r.dir == "send")
        room = SLOWDOWN_ROOM if self.mode == "act" else SLOWDOWN_ROOM_UNMITIGATED
        self.hcfg = replace(self.hcfg, trial_s=self.cfg.onset_s + room * done)
        tel = self._telemetry(start, end)
        self.places = int_places(self.topo, tel, self.hcfg.hosts)
        self.crossings = int_crossings(self.topo, tel, self.hcfg.hosts)
        self.scale = host_fault_scale(_warm_transfer_s(recs))
        self.log(f"[{self.mode}] warm-up job {done:.2f} s; trials may run "
                 f"{self.hcfg.trial_s:.1f} s; INT paths cross: "
                 + ", ".join(self.places.get("link_down") or []))

    def _telemetry(self, since: float, end: float) -> Any:
        time.sleep(1.2)
        wait_for_loss_export(self.tb.logs / "controller", end - 1.0, timeout_s=LOSS_EXPORT_WAIT_S)
        return controller_telemetry(self.topo, self.tb.logs / "controller", since_unix=since)

    def trial(self, name: str, fault: FaultSpec | None, *, flap: bool = False) -> dict[str, Any]:
        """One run of the ring with ``fault``; its figures (times from the onset)."""
        waited = self.wait_unavoided(30.0)
        tdir = self.dir / name
        inj: Any = Injector(tb=self.tb, topo=self.topo, python=self.hcfg.python)
        if fault is not None and fault.kind == "gray_loss" and not self._wan(fault.target):
            inj = _FabricGrayLoss(inj)
        if flap:
            inj = _Flapper(inj, self.cfg.flap_period_s)
        self.point_live(tdir)
        start, end = _run_ranks(self.tb, self.hcfg, self.topo, tdir, fault, inj)
        recs = read_logs([tdir / "collectives"]) if (tdir / "collectives").exists() else []
        done = rec.completion_s(recs, start, expect_sends=self.warm_sends)
        out: dict[str, Any] = {"trial": name, "mode": self.mode, "start": start, "end": end,
                               "completion_s": done, "waited_for_undo_s": round(waited, 2),
                               "fault": None if fault is None else {
                                   "kind": fault.kind, "target": fault.target,
                                   "flapping": flap}}
        if fault is not None and fault.kind in HOST_KINDS:
            out.update(self._moved(name, fault, start, end))
        elif fault is not None:
            tel = self._telemetry(start - 0.5, end)
            onset = start + fault.onset_s
            link = _link_of(self.topo, fault.target)
            st = rec.steps(recs)
            from controller.diagnose import Evidence
            ev = _evaluate(Evidence(topo=self.topo, records=recs, telemetry=tel, now=end),
                           fault, start)
            acts = self.state().get("actions") or []
            a = rec.first_action(acts, link, since=start)
            off = None if a is None or self.mode != "act" or not str(a.get("outcome")) \
                .startswith("written") else float(a["at"]) + float(a.get("write_s") or 0.0)
            crossing, seen = rec.int_paths_after(tel.flows, (fault.target, _reverse(fault.target)),
                                                 off + 0.5) if off else (None, None)
            out.update(link=link, onset=onset,
                       onset_to_culprit_s=ev.get("time_to_localise_s"),
                       diagnosed_top1=ev["correct_top1"],
                       onset_to_action_s=None if a is None else float(a["at"]) - onset,
                       action=None if a is None else {k: a.get(k) for k in (
                           "verb", "target", "kind", "component", "source", "outcome",
                           "at", "write_s", "reason")},
                       onset_to_off_s=None if off is None else off - onset,
                       int_samples_after_off=seen, int_samples_on_link_after_off=crossing,
                       onset_to_recovered_s=rec.recovered_after(st, onset))
            if flap:
                on_link = [x for x in acts if x.get("verb") in rec.ACTING_VERBS
                           and link in (x.get("avoid") or ()) and start <= float(x["at"]) <= end]
                first = min((float(x["at"]) for x in on_link), default=end)
                out["flap"] = {"target": fault.target, "period_s": self.cfg.flap_period_s,
                               "flapping_s": end - onset, "actions": len(on_link),
                               "allowed": 1 + int((end - first) // self.cfg.hold_down_s)
                               if on_link else 1}
        else:
            out["actions"] = [x for x in self.state().get("actions") or []
                              if x.get("verb") in rec.ACTING_VERBS
                              and start - 0.5 <= float(x.get("at") or 0.0) <= end + 1.0]
        (tdir / "trial.json").parent.mkdir(parents=True, exist_ok=True)
        (tdir / "trial.json").write_text(json.dumps(out, indent=1, default=str))
        self.log(f"[{self.mode}] {name}: " + _trial_line(out))
        return out


    def _moved(self, name: str, fault: FaultSpec, start: float, end: float) -> dict[str, Any]:
        """A host fault's trial: the controller's move of the rank (or its advice), and
        every rank's data check (the spare's too), from the ranks' last output lines."""
        onset = start + fault.onset_s
        acts = [a for a in self.state().get("actions") or []
                if a.get("verb") in ("move_rank", "none") and a.get("kind") == fault.kind
                and start <= float(a.get("at") or 0.0) <= end + 1.0]
        a = min(acts, key=lambda x: (x.get("verb") != "move_rank", float(x["at"])), default=None)
        checks = {}
        for who in [*(f"r{r}" for r in range(len(self.hcfg.hosts))), *self.hcfg.spares]:
            log_path = self.tb.logs / f"{name}-{who}.log"
            try:
                lines = [ln for ln in log_path.read_text().splitlines() if ln.startswith("{")]
                last = json.loads(lines[-1]) if lines else {}
            except (OSError, ValueError):
                last = {}
            if "result_ok" in last:          # a rank (a standby that took one over too)
                checks[who] = last["result_ok"]
        move = (a or {}).get("evidence", {}).get("move") or {}
        return {"target": fault.target, "onset": onset,
                "onset_to_action_s": None if a is None else float(a["at"]) - onset,
                "action": None if a is None else {k: a.get(k) for k in (
                    "verb", "target", "kind", "component", "source", "outcome", "at",
                    "write_s", "reason")},
                "moved_at_iter": move.get("at_iter"), "data_checks": checks,
                "data_ok": bool(checks) and all(v is True for v in checks.values())}


def _trial_line(t: dict[str, Any]) -> str:
    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}s"
    if t["fault"] is None:
        return f"no fault, job {s(t['completion_s'])}, actions {len(t['actions'])}"
    f = t["fault"]
    if "data_checks" in t:
        return (f"{f['kind']} at {f['target']}: job {s(t['completion_s'])}, action "
                f"{(t.get('action') or {}).get('verb')} {s(t['onset_to_action_s'])} "
                f"({(t.get('action') or {}).get('outcome')}), moved at iteration "
                f"{t['moved_at_iter']}, data checks {t['data_checks']}")
    return (f"{f['kind']}{' (flapping)' if f['flapping'] else ''} on {f['target']}: job "
            f"{s(t['completion_s'])}, culprit {s(t['onset_to_culprit_s'])}, action "
            f"{s(t['onset_to_action_s'])}, off {s(t['onset_to_off_s'])}, rate back "
            f"{s(t['onset_to_recovered_s'])}")


def _ratio(x: float | None, base: float | None) -> float | None:
    return None if x is None or not base else round(x / base, 3)


def run_recovery(cfg: RecoveryConfig, *, log: Any = print) -> dict[str, Any]:
    """Both test beds' trials; writes and returns OUT/summary.json."""
    from mininet_topos.testbed import Testbed
    from mininet_topos.topologies import resolve_topology

    if cfg.switch not in ("softswitch", "ebpf"):
        raise FaultError(f"recovery: switch {cfg.switch!r}: the controller acts on P4 "
                         "switches only (softswitch, ebpf)")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    topo = resolve_topology("two-dc")
    t_all = time.time()
    targets: dict[tuple[str, int], str] = {}
    trials: dict[str, list[dict[str, Any]]] = {}
    errors: list[dict[str, Any]] = []
    for mode in [m for m in ("act", "advise") if m in cfg.beds]:
        bed = _Bed(cfg, mode, topo, log)
        with Testbed(topo=topo, switch=cfg.switch, logs=bed.dir / "testbed", seed=cfg.seeds[0],
                     sample_interval_s=0.2, python=cfg.harness.python,
                     # the agents relay feedback to the ranks' control sockets: no
                     # rates (the ranks keep theirs), only a reroute's path notices;
                     # a spare that may take a rank over needs its agent too (the INT
                     # sink: without it the packets reach its rank with their INT)
                     agent_hosts=(*cfg.harness.hosts, *bed.hcfg.spares), feedback=True, rate_feedback=False,
                     mitigate=mode, controller_args=bed.controller_args,
                     mitigate_hold_down_s=cfg.hold_down_s, controller_interval_s=cfg.poll_s) as tb:
            bed.tb = tb
            bed.link_sockets()
            bed.warm_up()
            if not targets:
                targets = pick_targets(topo, bed.places, cfg.seeds, cfg.kinds, bed.crossings)
            runs = trials.setdefault(mode, [])


            def run(name: str, f: FaultSpec | None, seed: int | None = None,
                    flap: bool = False, bed: _Bed = bed, runs: list[dict[str, Any]] = runs
                    ) -> None:
                """A trial; one that fails is logged and left out (the rest go on), and the
                summary so far is written after each (a long run keeps what it measured)."""
                try:
                    t = bed.trial(name, f, flap=flap)
                except (ExperimentError, OSError, ValueError, KeyError) as exc:
                    log(f"[{bed.mode}] {name}: failed: {exc}")
                    errors.append({"mode": bed.mode, "trial": name, "error": str(exc)})
                    return
                runs.append(t if seed is None else {**t, "seed": seed})
                (out / "summary.json").write_text(json.dumps(
                    {**_summary(cfg, trials), "errors": errors, "partial": True},
                    indent=1, default=str))
            n_free = cfg.fault_free if mode == "act" else min(3, cfg.fault_free)
            free_at = {round(i * len(cfg.seeds) / max(1, n_free)) for i in range(n_free)}
            free_left = n_free
            for i, seed in enumerate(cfg.seeds):
                while i in free_at and free_left:   # fault-free runs spread among the others
                    run(f"free{n_free - free_left:02d}", None)
                    free_left -= 1
                    free_at.discard(i)
                for kind in cfg.kinds:
                    f = FaultSpec(kind=kind, target=targets[(kind, seed)], onset_s=cfg.onset_s,
                                  duration_s=3600.0)
                    if kind == "gray_loss":
                        f = replace(f, loss=cfg.loss)
                    elif kind == "straggler":
                        f = replace(f, late_s=cfg.late_s)
                    elif kind == "slow_receiver":
                        f = replace(f, delay_s=round(min(10.0, cfg.slow_rx_s * bed.scale), 3))
                    run(f"{kind}-s{seed}", f, seed)
            while free_left:
                run(f"free{n_free - free_left:02d}", None)
                free_left -= 1
            if cfg.flap and mode == "act" and "link_down" in cfg.kinds:
                f = FaultSpec(kind="link_down", target=targets[("link_down", cfg.seeds[0])],
                              onset_s=cfg.onset_s, duration_s=3600.0)
                run("flap", f, flap=True)
    summary = {**_summary(cfg, trials), "errors": errors}
    summary["wall_s"] = round(time.time() - t_all, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for line in rec.format_table(summary["by_kind"], actions_fault_free=summary["actions_fault_free"],
                                 fault_free_trials=summary["fault_free_trials"],
                                 flap=summary.get("flap")):
        log(line)
    return summary


def culprit_named(trial: dict[str, Any]) -> tuple[float | None, str | None]:
    """When the acting bed first named the fault's culprit, and who named it: the
    offline diagnosis of the trial's records, or else the controller's own rules (its
    action on the injected link or rank names the kind and the target; the trial's
    action is only ever matched to that target).  Why both: on the acting bed the
    controller takes the traffic off a gray or dead link 0.5-1.6 s after the onset,
    before the transfers crossing it slowed enough for the offline diagnosis to see,
    so that one often names nothing there; the controller did name it."""
    if trial.get("onset_to_culprit_s") is not None:
        return float(trial["onset_to_culprit_s"]), "diagnosis"
    if trial.get("onset_to_action_s") is not None:
        return float(trial["onset_to_action_s"]), "controller"
    return None, None


def _summary(cfg: RecoveryConfig, trials: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The rows of ``summary.json["mitigation"]``: one per (fault, seed), the acting
    bed's times, both beds' completion against their own fault-free median."""
    def base(mode: str) -> float | None:
        free = [t["completion_s"] for t in trials.get(mode, []) if t["fault"] is None
                and t["completion_s"] is not None]
        return float(np.median(free)) if free else None
    b_act, b_adv = base("act"), base("advise")
    adv = {(t["fault"]["kind"], t["seed"]): t for t in trials.get("advise", [])
           if t["fault"] is not None and "seed" in t}
    rows = []
    for t in trials.get("act", []):
        if t["fault"] is None or "seed" not in t:
            continue
        u = adv.get((t["fault"]["kind"], t["seed"]))
        culprit, named_by = culprit_named(t)
        rows.append({"fault": t["fault"]["kind"], "target": t["fault"]["target"], "seed": t["seed"],
                     "onset_to_culprit_s": None if culprit is None else round(culprit, 3),
                     "culprit_named_by": named_by,
                     **{k: None if t.get(k) is None else round(float(t[k]), 3)
                        for k in ("onset_to_action_s", "onset_to_off_s", "onset_to_recovered_s")},
                     "completion_ratio_mitigated": _ratio(t["completion_s"], b_act),
                     "completion_ratio_unmitigated": _ratio(u["completion_s"], b_adv) if u else None,
                     "int_samples_on_link_after_off": t.get("int_samples_on_link_after_off"),
                     "action": (t.get("action") or {}).get("verb"),
                     **({"data_ok": t["data_ok"], "moved_at_iter": t.get("moved_at_iter")}
                        if "data_ok" in t else {})})
    free = [t for t in trials.get("act", []) if t["fault"] is None]
    flap = next((t["flap"] for t in trials.get("act", []) if t.get("flap")), None)
    return {"mitigation": rows, "by_kind": rec.summarise(rows),
            "actions_fault_free": sum(len(t["actions"]) for t in free),
            "fault_free_trials": len(free), "flap": flap,
            "fault_free_completion_s": {"act": b_act, "advise": b_adv},
            "config": {"switch": cfg.switch, "seeds": list(cfg.seeds), "kinds": list(cfg.kinds),
                       "recovery": cfg.recovery, "poll_s": cfg.poll_s, "allreduces": cfg.allreduces,
                       "loss": cfg.loss, "onset_s": cfg.onset_s, "hold_down_s": cfg.hold_down_s},
            "trials": trials}
