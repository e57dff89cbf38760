"""The ``wan_recovery`` experiment: loss recovery modes across a real WAN path.

Why not the Mininet runner: the sweep has 9 loss models x 2 round trips x 4 modes =
72 runs; on Mininet each would rebuild a network of switches.  The question is how the
endpoints recover, so the path is the lighter real one: two host namespaces joined
through a middle namespace by veth pairs, the project's WAN delay line
(:class:`mininet_topos.wan.WanLink`, one-way delay = RTT / 2 each way) between the
middle namespace's two ends, and the eBPF loss emulator (:mod:`ebpf.loss`) at tc egress
toward the receiver, dropping RoCEv2 data (UDP) packets with the cell's loss model
(acknowledgements are not dropped).  One ``python -m traffic p2p`` process per host.

The controller's part: for each loss model the link's loss map is what the controller
would fit (:func:`controller.lossmap.burst.fit_gilbert_elliott` on a trace of the
model), the fixed ``fec`` mode gets the (k, m) the loss map's policy chooses for it
(:func:`controller.lossmap.fec.choose_fec`), and ``auto`` gets the fitted model as its
loss feedback (``--path-loss``) and decides per message (:mod:`traffic.recovery`).

Results: ``summary.json["recovery"]``, one row per (loss, RTT, mode).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from common.loss import LossModel, LossProcess, LossSpecError
from controller.lossmap.burst import cycles_from_sequence, fit_gilbert_elliott
from controller.lossmap.fec import LinkModel, choose_fec
from mininet_topos.preset_kind import spec_kind
from traffic import startgate
from traffic.qp_types import DEFAULT_MTU
from traffic.recovery import plan_label

from .errors import SpecError

__all__ = ["ExtraCell", "RecoverySweep", "check_targets", "fitted_model", "is_recovery_spec", "load_sweep",
           "markdown_table", "parse_loss_label", "plot_p99", "run_sweep", "steady_fcts",
           "targets_table", "unfinished_lines"]

_PROJECT_ROOT = Path(__file__).resolve().parents[2]
MODES = ("gbn", "sr", "fec", "auto")
"""The recovery modes a sweep runs, in the tables' order."""


@dataclass(slots=True, kw_only=True)
class ExtraCell:
    """One more (loss, RTT) cell with its own rate and load (unset: the sweep's).

    Why: go-back-N's goodput tends to one packet per loss interval's round trip
    (about size / (p x RTT): ~42 Mbit/s at 1 %, 20 ms, 1 KiB) whatever the rate, while
    selective repeat and FEC scale with it; a target such as 20 x go-back-N needs a
    bandwidth-delay product far above 1/p, which the main grid's rate may not give.
    """

    loss: str
    rtt_ms: float
    rate: str
    size: str | None = None
    count: int | None = None
    inflight: int | None = None
    timeout_s: float | None = None
    modes: list[str] | None = None


@dataclass(slots=True, kw_only=True)
class RecoverySweep:
    """The sweep's spec (``kind: recovery_sweep`` in a preset file)."""

    name: str = "wan_recovery"
    losses: list[str] = field(default_factory=lambda: ["0.01"])
    rtt_ms: list[float] = field(default_factory=lambda: [20.0])
    modes: list[str] = field(default_factory=lambda: list(MODES))
    rate: str = "100M"
    size: str = "256K"
    count: int = 24
    counts: dict[str, int] = field(default_factory=dict)
    """Messages per mode where not ``count`` (``{gbn: 24}``).  Why: a cell's p99 is a
    percentile only over many messages (with 24 it is nearly the largest), but go-back-N
    at 5 % loss and 60 ms delivers ~2 Mbit/s, 90 s for 96 messages of 256 KiB, and
    its goodput, all a target reads of it, settles in fewer."""
    inflight: int = 2
    timeout_s: float = 40.0
    seed: int = 1
    fec_target_residual: float = 1e-3
    fec_max_overhead: float = 0.25
    engine: str = "python"
    """Every mode's data path (python, native; the engine executes auto's plans too)."""
    extra_cells: list[ExtraCell] = field(default_factory=list)
    """Cells run after the grid, each at its own rate (:class:`ExtraCell`)."""
    burst_clock: str = "packet"
    """What moves a Gilbert-Elliott cell's chain: ``packet`` (once per packet, netem's
    chain: a burst of B is B of the sender's packets however far apart), or ``line``
    (also once per full packet's wire time at the cell's rate, :attr:`LossModel.slot_s`:
    a burst of B lasts B packet times of the path, and a sender that has gone quiet
    finds it over, as on a WAN).  The loss map's fit and the policy see the same model
    either way: at the cell's rate the two chains are one."""
    reference: bool = False
    """Also run selective repeat with the loss off, once per RTT of the grid and once per
    extra cell (rows with ``"reference": true``, loss ``0%``).  Why: no scheme's message
    FCT beats the path's without loss, and its p99 there is far from the serialisation
    time (two messages share the pacer; the delay line and the hosts add their spread),
    so where 0.8 x selective repeat's p99 falls below that loss-free p99 the target asks
    for a path faster than the one measured; :func:`check_targets` says so per cell."""

    def for_cell(self, cell: ExtraCell) -> RecoverySweep:
        """This sweep with ``cell``'s rate and load in place of its own."""
        return dataclasses.replace(
            self, rate=cell.rate, size=cell.size or self.size, count=cell.count or self.count,
            inflight=cell.inflight or self.inflight,
            timeout_s=cell.timeout_s or self.timeout_s, modes=cell.modes or self.modes,
            extra_cells=[])

    def count_for(self, mode: str) -> int:
        """Messages a run of ``mode`` sends (:attr:`counts`, else :attr:`count`)."""
        return self.counts.get(mode, self.count)


BURST_CLOCKS = ("packet", "line")


def line_slot_s(rate: str, mtu: int = DEFAULT_MTU) -> float:
    """A full data packet's wire time at ``rate`` (the sweep's transfers use traffic's
    default MTU): the slot of the ``line`` clock."""
    from traffic.requester import full_pkt_wire_bytes
    from traffic.workloads import parse_rate

    return full_pkt_wire_bytes(mtu) * 8 / parse_rate(rate)


def is_recovery_spec(path: Path) -> bool:
    return spec_kind(path) == "recovery_sweep"


def load_sweep(path: Path) -> RecoverySweep:
    obj = yaml.safe_load(path.read_text())
    if not isinstance(obj, dict):
        raise SpecError(f"{path}: expected a mapping")
    obj = {k: v for k, v in obj.items() if k not in ("kind", "description")}
    known = set(RecoverySweep.__dataclass_fields__)
    unknown = set(obj) - known
    if unknown:
        raise SpecError(f"{path}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    cells = obj.pop("extra_cells", None) or []
    if not isinstance(cells, list):
        raise SpecError(f"{path}: extra_cells: expected a list of mappings")
    sw = RecoverySweep(**obj, extra_cells=[_extra_cell(path, i, c) for i, c in enumerate(cells)])
    for label in sw.losses:
        parse_loss_label(label)
    for modes, where in [(sw.modes, "modes"),
                         *((c.modes or [], f"extra_cells[{i}].modes")
                           for i, c in enumerate(sw.extra_cells))]:
        bad = [m for m in modes if m not in MODES]
        if bad:
            raise SpecError(f"{path}: {where} {bad} unknown; known: gbn, sr, fec, auto")
    if not isinstance(sw.counts, dict) or any(
            m not in MODES or not isinstance(n, int) or n < 1
            for m, n in sw.counts.items()):
        raise SpecError(f"{path}: counts {sw.counts!r}: expected a mapping of gbn, sr, fec "
                        "or auto to a number of messages (>= 1)")
    if sw.engine not in ("python", "native"):
        raise SpecError(f"{path}: engine {sw.engine!r} unknown; known: python, native")
    if sw.burst_clock not in BURST_CLOCKS:
        raise SpecError(f"{path}: burst_clock {sw.burst_clock!r} unknown; known: "
                        f"{', '.join(BURST_CLOCKS)}")
    return sw


def _extra_cell(path: Path, i: int, raw: object) -> ExtraCell:
    """An ``extra_cells`` entry, checked; errors name the entry and the key."""
    from traffic.workloads import parse_rate, parse_size

    where = f"{path}: extra_cells[{i}]"
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping")
    known = set(ExtraCell.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    missing = {"loss", "rtt_ms", "rate"} - set(raw)
    if missing:
        raise SpecError(f"{where}: missing {sorted(missing)}")
    try:
        cell = ExtraCell(**raw)
        parse_loss_label(str(cell.loss))
        parse_rate(str(cell.rate))
        if cell.size is not None:
            parse_size(str(cell.size))
    except (TypeError, ValueError) as e:
        raise SpecError(f"{where}: {e}") from None
    if float(cell.rtt_ms) <= 0:
        raise SpecError(f"{where}: rtt_ms {cell.rtt_ms} must be > 0")
    return cell


REFERENCE_LOSS = "0%"
"""The loss label of the reference rows (:attr:`RecoverySweep.reference`)."""


def parse_loss_label(label: str) -> LossModel:
    """``0.01`` (random), ``ge:1%/10`` (Gilbert, 1 % loss in mean bursts of 10), or
    ``0%`` (no loss): :meth:`LossModel.parse`'s forms, a :class:`SpecError` here."""
    try:
        return LossModel.parse(label)
    except LossSpecError as e:
        raise SpecError(str(e)) from None


def fitted_model(model: LossModel, *, n: int = 400_000, seed: int = 0) -> LossModel:
    """What the controller's loss map fits on a link losing packets by ``model``."""
    proc = LossProcess(model, seed=seed)
    lost = np.fromiter((proc.lost() for _ in range(n)), dtype=bool, count=n)
    cy = cycles_from_sequence(lost)
    if cy.loss_len.size < 2:
        return LossModel.bernoulli(float(lost.mean()))
    return fit_gilbert_elliott(cy, resamples=20, seed=seed).model


def policy_fec(model: LossModel, sw: RecoverySweep) -> tuple[int, int]:
    """The loss map policy's fixed (k, m) for the fitted model (m >= 1)."""
    lm = (LinkModel(p=model.p, r=model.r, loss_in_bad=1.0 - model.h)
          if model.kind == "gilbert-elliott" else LinkModel(p=1.0, r=0.0,
                                                             loss_in_bad=model.mean_loss))
    pol = choose_fec([lm], target_residual=sw.fec_target_residual,
                     max_overhead=sw.fec_max_overhead)
    return (pol.k, pol.m) if pol.k > 0 and pol.m > 0 else (32, 1)


# -- the bed ------------------------------------------------------------------------------
class Bed:
    """h1 -- [mid: delay line, eBPF loss toward h2] -- h2 on a fresh /24."""

    def __init__(self, subnet: str | None = None) -> None:
        from ebpf.loss import LossEmulator
        from mininet_topos.wan import WanLink
        from mininet_topos.wan.delayline_link import native_line_built
        from mininet_topos.wan.netns_path import WanPath

        self._stack = contextlib.ExitStack()
        try:
            path = WanPath("wr", subnet)
            self._stack.callback(path.close)
            self.h1, self.h2, self.mid, self.ips = path.h1, path.h2, path.mid, path.ips
            m1, m2 = path.m1, path.m2
            # the native line where built: the Python one carries ~100 Mbit/s at most
            self.wan = WanLink(m1.ifname, m2.ifname, netns=self.mid.name, delay_ms=10.0,
                               line="native" if native_line_built() else "python")
            self._stack.callback(self.wan.stop)
            self.wan.start()
            # data toward h2 leaves the middle namespace on m2: drop there
            self.loss = LossEmulator(m2.ifname, netns=self.mid.name, direction="egress",
                                     udp_only=True)
            self._stack.enter_context(self.loss)
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        self._stack.close()


@contextlib.contextmanager
def bed(subnet: str | None = None) -> Iterator[Bed]:
    b = Bed(subnet)
    try:
        yield b
    finally:
        b.close()


def _window(rate_bps: float, rtt_s: float, in_flight_pkts: int) -> int:
    """Two bandwidth-delay products, and at least the messages in flight (+25 %): a
    window that blocks inside a message cuts FEC groups short in every coded mode."""
    bdp2 = round(2 * rate_bps * rtt_s / 8 / 1100)
    return max(64, min(8000, max(bdp2, round(1.25 * in_flight_pkts))))


def run_point(b: Bed, sw: RecoverySweep, *, mode: str, rtt_s: float, fec: tuple[int, int],
              path_loss: LossModel | None, out_dir: Path, seed: int,
              python: str = sys.executable) -> dict[str, Any]:
    """One p2p transfer in ``mode``; the raw counters and the message FCTs."""
    from traffic.workloads import parse_rate, parse_size

    rate = parse_rate(sw.rate)
    msg_pkts = -(-parse_size(sw.size) // 1024)
    hosts = ",".join(b.ips)
    common = ["--hosts", hosts, "-s", sw.size, "-c", str(sw.count_for(mode)), "--rate", sw.rate,
              "--mode", mode, "--fec", f"{fec[0]},{fec[1]}", "--window",
              str(_window(rate, rtt_s, sw.inflight * msg_pkts)), "--inflight", str(sw.inflight),
              "--timeout", f"{sw.timeout_s}", "--seed", str(seed),
              "--rto-min", f"{max(0.05, 2 * rtt_s)}",
              "--engine", sw.engine]
    if mode == "auto" and path_loss is not None:
        common += ["--path-loss", _loss_text(path_loss)]
    # both start once both are bound (traffic.startgate): a sender that starts while
    # the receiver is still importing loses its first packets to a closed port (a fixed
    # start 4 s ahead still saw 1-3 s late starts on the loaded machine)
    start = out_dir / "start"
    startgate.clear(start)   # a re-run into the same folder
    procs: list[subprocess.Popen] = []
    for rank, ns in ((1, b.h2), (0, b.h1)):
        cmd = [python, "-m", "traffic", "p2p", *common, "--rank", str(rank),
               "--start-file", str(start), "-o", str(out_dir / f"r{rank}.json")]
        procs.append(ns.popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, cwd=str(_PROJECT_ROOT)))
    startgate.start_together(start, 2, timeout_s=60.0,
                             alive=lambda: all(p.poll() is None for p in procs))
    errs = []
    for p in reversed(procs):
        try:
            _o, err = p.communicate(timeout=sw.timeout_s + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            _o, err = p.communicate()
        errs.append(err[-500:] if err else "")
    try:
        tx = json.loads((out_dir / "r0.json").read_text())
        rx = json.loads((out_dir / "r1.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"finished": False, "error": " | ".join(e for e in errs if e)}
    reqs = list(tx["endpoint"]["requesters"].values())
    resps = list(rx["endpoint"]["responders"].values())
    delivered = rx["bytes_received"]
    fcts, every = steady_fcts(tx["messages"])
    schemes: dict[str, int] = {}
    reasons: dict[str, str] = {}
    for m in tx["messages"]:
        rec = m.get("recovery")
        if rec:
            key = plan_label(rec["scheme"], k=rec.get("k", 0), m=rec.get("m", 0),
                             depth=rec.get("depth", 1), tail_pkts=rec.get("tail_pkts", 0))
            schemes[key] = schemes.get(key, 0) + 1
            reasons.setdefault(key, rec["reason"])
    return {
        "finished": bool(tx["finished"] and rx["finished"]),
        "endpoint": tx.get("engine", "python"),
        "fec_codec": tx.get("fec_codec", "numpy"),
        "goodput_bps": delivered * 8 / max(1e-9, tx["completion_s"]),
        "fct_p50_s": float(np.percentile(fcts, 50)) if fcts else None,
        "fct_p99_s": float(np.percentile(fcts, 99)) if fcts else None,
        "fct_p99_all_s": float(np.percentile(every, 99)) if every else None,
        "warmup_msgs": len(every) - len(fcts),
        "completion_s": tx["completion_s"],
        "wire_bytes_per_byte": sum(r["tx_bytes"] for r in reqs) / max(1, delivered),
        "retx_pkts": sum(r["retx_pkts"] for r in reqs),
        "repair_pkts_sent": sum(r["repair_pkts"] for r in reqs),
        "repaired_pkts": sum(r["fec_repaired"] for r in resps),
        "timeouts": sum(r["timeouts"] for r in reqs),
        "messages": len(every),
        "stall_s": tx.get("stall_s", 0.0),
        **({"schemes": schemes, "reasons": reasons} if schemes else {}),
    }


def unfinished_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per run that did not finish: which cell and mode, and how far it got
    (messages completed within its timeout) or why it stopped (the ranks' stderr)."""
    out = []
    for r in rows:
        if r.get("finished"):
            continue
        where = " ".join(x for x in (r["loss"], f"{r['rtt_ms']:g} ms", r.get("rate"),
                                     r["mode"]) if x)
        why = (f"{r.get('messages', 0)} messages completed within its timeout (timeout_s)"
               if "goodput_bps" in r else (r.get("error") or "no output from the ranks"))
        out.append(f"not finished: {where}: {why}")
    return out


def steady_fcts(messages: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """(FCTs of the messages posted once the sender had its first completion, FCTs of
    every message) of a rank's ``messages`` records.

    Why the first list is the one the percentiles come from: the messages posted
    before any completion fill the window from a cold start, and their FCTs are
    decided by when the runner's loop got to post them (the second message of a
    100 Mbit/s, 20 ms cell was posted 1-26 ms after the first, and waited behind it
    for the rest: its FCT 44-74 ms, the p99 of 24 messages in every mode it was
    slow in), not by the recovery scheme; from then on a message is posted when one
    completes, as a job's steady stream of collectives posts them.  Records without
    ``posted_s`` (older runs), and runs where every message was posted before the
    first completion (nothing in the window's wake), count every message."""
    tx = [m for m in messages if m["dir"] == "tx" and m["fct_s"] is not None]
    every = [float(m["fct_s"]) for m in tx]
    if not tx or any("posted_s" not in m for m in tx):
        return every, every
    first_done = min(m["posted_s"] + m["fct_s"] for m in tx)
    steady = [float(m["fct_s"]) for m in tx if m["posted_s"] >= first_done]
    return (steady or every), every


def _loss_text(m: LossModel) -> str:
    if m.kind == "gilbert-elliott":
        return f"ge:{m.p:.6g},{m.r:.6g},{m.h:.6g},{m.k:.6g}"
    return f"{m.mean_loss:.6g}"


def run_sweep(sw: RecoverySweep, out: Path, *, log=print) -> dict[str, Any]:
    """Every (loss, RTT, mode) cell on one bed; writes ``out/summary.json``."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    controller: dict[str, Any] = {}
    fits: dict[str, LossModel] = {}   # per loss label, what the loss map would fit
    # (loss label, RTT, the cell's sweep, its name's rate tag, a reference row)
    grid: list[tuple[str, float, RecoverySweep, str, bool]] = []
    if sw.reference:
        grid += [(REFERENCE_LOSS, float(rtt), dataclasses.replace(sw, modes=["sr"]), "", True)
                 for rtt in sw.rtt_ms]
    grid += [(label, float(rtt), sw, "", False) for label in sw.losses for rtt in sw.rtt_ms]
    for c in sw.extra_cells:
        csw = sw.for_cell(c)
        if sw.reference:
            grid.append((REFERENCE_LOSS, float(c.rtt_ms), dataclasses.replace(csw, modes=["sr"]),
                         f"_{csw.rate}", True))
        grid.append((c.loss, float(c.rtt_ms), csw, f"_{csw.rate}", False))
    with bed() as b:
        for label, rtt, csw, tag, is_ref in grid:
            li = sw.losses.index(label) if label in sw.losses else len(sw.losses)
            model = parse_loss_label(label)
            if label not in fits:
                fit = fits[label] = fitted_model(model, seed=sw.seed + li)
                k, m = policy_fec(fit, sw)
                controller[label] = {"fitted": _loss_text(fit), "fec_k": k, "fec_m": m,
                                     "fitted_loss": fit.mean_loss,
                                     "fitted_burst": fit.mean_burst_len}
            fit = fits[label]
            k, m = controller[label]["fec_k"], controller[label]["fec_m"]
            if sw.burst_clock == "line":
                model = model.clocked(line_slot_s(csw.rate))
            b.loss.set_model(model)
            b.wan.update(delay_ms=rtt / 2)
            for mode in csw.modes:
                cell_seed = sw.seed * 1000 + li * 10 + int(rtt)
                b.loss.reseed(cell_seed)
                name = f"{label.replace('/', '_').replace(':', '')}_{rtt:g}{tag}_{mode}"
                d = out / "runs" / name
                d.mkdir(parents=True, exist_ok=True)
                r = run_point(b, csw, mode=mode, rtt_s=rtt / 1e3, fec=(k, m),
                              path_loss=fit, out_dir=d, seed=cell_seed)
                row = {"loss": label, "rtt_ms": rtt, "rate": csw.rate, "mode": mode,
                       **({"fec": [k, m]} if mode == "fec" else {}),
                       **({"reference": True} if is_ref else {}), **r}
                rows.append(row)
                log(format_row(row))
        wan_stats = b.wan.stats()
        wan_line = b.wan.line
    targets = check_targets(rows)
    summary: dict[str, Any] = {"experiment": sw.name, "engine": sw.engine,
               "path": f"netns veths + WAN delay line ({wan_line}) + eBPF loss "
                       "(data direction)",
               "rate": sw.rate, "size": sw.size, "count": sw.count, "counts": sw.counts,
               "seed": sw.seed, "burst_clock": sw.burst_clock,
               "inflight": sw.inflight,
               "extra_cells": [dataclasses.asdict(c) for c in sw.extra_cells],
               "controller": controller, "recovery": rows, "wan": wan_stats,
               "targets": targets}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "recovery.md").write_text(markdown_table(rows) + "\n\n"
                                     + targets_table(targets) + "\n")
    plot_p99(rows, out / "p99_fct.png")
    return summary


def format_row(r: dict[str, Any]) -> str:
    def ms(v: float | None) -> str:
        return f"{v * 1e3:7.0f}" if v is not None else "      -"
    gp = (r.get("goodput_bps") or 0.0) / 1e6
    sch = ",".join(f"{k}:{v}" for k, v in (r.get("schemes") or {}).items())
    return (f"{r['loss']:>9} {r['rtt_ms']:>4g} {r.get('rate', ''):>5} {r['mode']:>4} {gp:7.1f} "
            f"{ms(r.get('fct_p50_s'))} {ms(r.get('fct_p99_s'))} "
            f"{r.get('wire_bytes_per_byte', 0):6.3f} {r.get('retx_pkts', 0):6} "
            f"{r.get('repaired_pkts', 0):6} {r.get('timeouts', 0):4}"
            f"{'' if r.get('finished') else ' (unfinished)'} {sch}")


HEADER = (f"{'loss':>9} {'rtt':>4} {'rate':>5} {'mode':>4} {'Mb/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'wire/B':>6} {'retx':>6} {'repair':>6} {'RTOs':>4}")


# -- the targets and the README table ---------------------------------------------
Cell = tuple[str, float, str]   # loss label, RTT in ms, rate ("" in rows without one)


def _cells(rows: list[dict[str, Any]]) -> dict[Cell, dict[str, dict[str, Any]]]:
    out: dict[Cell, dict[str, dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["loss"], r["rtt_ms"], r.get("rate", "")), {})[r["mode"]] = r
    return out


def _rtt_label(rows: list[dict[str, Any]], rtt: float, rate: str, unit: str = "") -> str:
    """The RTT, and the rate when the rows have more than one (extra cells)."""
    main = rows[0].get("rate", "") if rows else ""
    return f"{rtt:g}{unit}" + (f" @ {rate}" if rate != main else "")


def check_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target of the wan_recovery issue, per cell: measured ratio and verdict.

    With reference rows (:attr:`RecoverySweep.reference`) the ``p99 FCT <= 0.8 x SR``
    checks also carry ``floor``: the loss-free p99 of the same RTT and rate over SR's
    p99, the least ratio the path gives any scheme; above 0.8 the target is out of its
    reach in that cell (``reachable`` false).
    """
    out: list[dict[str, Any]] = []
    refs = {(r["rtt_ms"], r.get("rate", "")): r for r in rows
            if r.get("reference") and r.get("finished") and r.get("fct_p99_s")}
    for (loss, rtt, rate), modes in _cells(rows).items():
        if any(m.get("reference") for m in modes.values()):
            continue
        a = modes.get("auto")
        if a is None or not a.get("finished"):
            continue
        fixed = [m for k, m in modes.items() if k != "auto" and m.get("finished")]
        q = parse_loss_label(loss).mean_loss
        where = f"{loss} {_rtt_label(rows, rtt, rate, 'ms')}"
        if fixed:
            best_gp = max(m["goodput_bps"] for m in fixed)
            best_p99 = min(m["fct_p99_s"] for m in fixed)
            out.append({"cell": where, "target": "goodput >= 0.97 x best fixed",
                        "ratio": a["goodput_bps"] / best_gp,
                        "ok": a["goodput_bps"] >= 0.97 * best_gp})
            out.append({"cell": where, "target": "p99 FCT <= 1.03 x best fixed",
                        "ratio": a["fct_p99_s"] / best_p99,
                        "ok": a["fct_p99_s"] <= 1.03 * best_p99})
        sr = modes.get("sr")
        if sr and sr.get("finished") and q >= 0.01 - 1e-9:
            check = {"cell": where, "target": "p99 FCT <= 0.8 x SR",
                     "ratio": a["fct_p99_s"] / sr["fct_p99_s"],
                     "ok": a["fct_p99_s"] <= 0.8 * sr["fct_p99_s"]}
            ref = refs.get((rtt, rate))
            if ref is not None:
                check["floor"] = ref["fct_p99_s"] / sr["fct_p99_s"]
                check["reachable"] = check["floor"] <= 0.8
            out.append(check)
            out.append({"cell": where, "target": "goodput >= SR",
                        "ratio": a["goodput_bps"] / sr["goodput_bps"],
                        "ok": a["goodput_bps"] >= sr["goodput_bps"]})
        if sr and sr.get("finished") and q <= 0.001 + 1e-9:
            out.append({"cell": where, "target": "wire bytes <= 1.03 x SR",
                        "ratio": a["wire_bytes_per_byte"] / sr["wire_bytes_per_byte"],
                        "ok": a["wire_bytes_per_byte"] <= 1.03 * sr["wire_bytes_per_byte"]})
        g = modes.get("gbn")
        if g and loss in ("1%", "0.01") and rtt == 20:
            gp = g["goodput_bps"] if g.get("finished") else 0.0
            out.append({"cell": where, "target": "goodput >= 20 x GBN",
                        "ratio": a["goodput_bps"] / gp if gp else float("inf"),
                        "ok": a["goodput_bps"] >= 20 * gp})
    return out


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """One line per cell: goodput and p99 FCT of each mode, auto's choice."""
    cells = _cells(rows)
    modes = [m for m in MODES if any(m in v for v in cells.values())]
    head = ("| loss | RTT | " + " | ".join(f"{m} Mb/s" for m in modes) + " | "
            + " | ".join(f"{m} p99 ms" for m in modes)
            + " | auto wire/B (SR) | auto: scheme x msgs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (loss, rtt, rate), v in cells.items():
        def gp(m: str, v: dict = v) -> str:
            r = v.get(m)
            return "-" if r is None else (f"{r['goodput_bps'] / 1e6:.1f}"
                                          + ("" if r.get("finished") else "*"))

        def p99(m: str, v: dict = v) -> str:
            r = v.get(m)
            return ("-" if r is None or r.get("fct_p99_s") is None
                    else f"{r['fct_p99_s'] * 1e3:.0f}")
        a, s = v.get("auto", {}), v.get("sr", {})
        wire = (f"{a['wire_bytes_per_byte']:.3f} ({s['wire_bytes_per_byte']:.3f})"
                if a.get("wire_bytes_per_byte") and s.get("wire_bytes_per_byte") else "-")
        sch = ", ".join(f"{k} x{n}" for k, n in (a.get("schemes") or {}).items())
        lines.append(f"| {loss} | {_rtt_label(rows, rtt, rate)} | "
                     + " | ".join(gp(m) for m in modes) + " | "
                     + " | ".join(p99(m) for m in modes) + f" | {wire} | {sch} |")
    if any(r.get("warmup_msgs") for r in rows):
        lines.append("\np99: the messages posted after the sender's first completion "
                     "(`fct_p99_s`; every message's: `fct_p99_all_s` in summary.json)")
    if not all(r.get("finished") for r in rows):
        lines.append("\n\\*: the run did not finish within its timeout (`timeout_s`): "
                     "the goodput of what it delivered, the p99 of the messages it "
                     "completed")
    return "\n".join(lines)


def targets_table(checks: list[dict[str, Any]]) -> str:
    """:func:`check_targets`' verdicts as one line per target: cells met, and the
    misses with their ratios."""
    order: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        order.setdefault(c["target"], []).append(c)
    lines = ["| target | cells met | missed (cell, ratio) |", "|---|---|---|"]
    for target, cs in order.items():
        missed = "; ".join(f"{c['cell']} {c['ratio']:.2f}" + _floor_text(c)
                           for c in cs if not c["ok"]) or "-"
        lines.append(f"| {target} | {sum(c['ok'] for c in cs)} / {len(cs)} | {missed} |")
        within = [c for c in cs if c.get("reachable")]
        if any("reachable" in c for c in cs):
            missed = "; ".join(f"{c['cell']} {c['ratio']:.2f}" for c in within if not c["ok"])
            lines.append(f"| {target}, where the loss-free p99 is under it | "
                         f"{sum(c['ok'] for c in within)} / {len(within)} | {missed or '-'} |")
    return "\n".join(lines)


def _floor_text(check: dict[str, Any]) -> str:
    """`` (loss-free 0.93)`` for a miss whose cell's loss-free p99 is over 0.8 x SR's."""
    return (f" (loss-free {check['floor']:.2f})"
            if "floor" in check and not check.get("reachable") else "")


def plot_p99(rows: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """Grouped bars: p99 message FCT of every mode, by (loss, RTT) cell."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cells = _cells(rows)
    modes = [m for m in MODES if any(m in v for v in cells.values())]
    fig = Figure(figsize=(max(8, len(cells) * 0.8), 4.5))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(modes))
    x = np.arange(len(cells))
    for i, mode in enumerate(modes):
        ys = [((v.get(mode) or {}).get("fct_p99_s") or np.nan) * 1e3 for v in cells.values()]
        ax.bar(x + (i - (len(modes) - 1) / 2) * width, ys, width, label=mode)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{loss}\n{_rtt_label(rows, rtt, rate, ' ms')}"
                        for loss, rtt, rate in cells], fontsize=7)
    ax.set_ylabel("p99 message FCT (ms)")
    ax.set_yscale("log")
    ax.set_title(title or "wan_recovery: p99 message FCT by loss model and RTT")
    ax.legend(ncol=len(modes), fontsize=8)
    fig.tight_layout()
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
