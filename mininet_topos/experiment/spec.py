"""Experiment specs: what to run, read from YAML, checked before anything starts.

Why: an experiment touches the topology, the switches, the traffic generator, congestion
control and loss recovery; a typo found after the network is up wastes minutes, so
every field is checked here, and every message names the field, the value and what is
allowed.  A spec may carry a ``sweep`` (field -> list of values); :func:`expand` turns it
into one spec per combination so variants run side by side under one results folder.

Format (YAML)::

    name: demo
    topology: two-dc            # standard name or topology file (relative to the spec)
    switch: linux-router        # softswitch | ebpf | bmv2 | linux-router
    links:                      # overrides of topology links, by "s1:3-s5:3"
      "s1:3-s5:3": {delay_ms: 10, rate_mbps: 100,
                    loss: {model: bursty, mean: 0.01, burst_pkts: 3}}
    workload:
      kind: allreduce           # p2p | incast | alltoall | allreduce | kvcache
      hosts: [h1, h3, h5, h7]   # rank order
      size: 1M
      count: 2
      rate: 100M                # per-QP rate (the controller's HPCC may change it)
      rto_min_s: 0.1            # the senders' retransmission timer floor (default 30 ms)
      engine: auto              # auto | native | python: the QPs' data path (traffic --engine)
    cc: hpcc                    # none | dcqcn | hpcc (controller) | hpcc-sender (per ACK)
    controller_max_rate: 5M     # cc: hpcc's max rate (controller run --max-rate; omitted:
                                # each sender's host link rate)
    ecn: {kmin_bytes: 2000, kmax_bytes: 20000, pmax: 0.1}   # P4 switches' ECN marking
                                # (default: the controller's, DCQCN's 5 KB / 200 KB / 1 %)
    hpcc: {eta: 0.95, max_stage: 5, w_ai: 0.01}   # with cc: hpcc-sender, HPCC's parameters
                                # (traffic.cc.hpcc.HpccSettings; also base_rtt_s,
                                # min_base_rtt_s, multi_rate, window; omitted: defaults)
    recovery: fec               # gbn | sr | fec
    fec: auto                   # auto (the loss-map policy) or "K,M"
    duration_s: 60              # upper bound of the workload
    sample_interval_s: 0.2
    seed: 1
    sweep: {cc: [none, dcqcn, hpcc]}
"""
from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from common.loss import LossModel
from controller.topology import Topology, TopologyError
from controller.topology.errors import did_you_mean
from traffic.cc import registry as cc_registry
from traffic.cc.hpcc import HpccSettings
from traffic.errors import ConfigError
from traffic.workloads import parse_rate

from .errors import SpecError

__all__ = [
    "CC_MODES",
    "RECOVERY_MODES",
    "SWITCH_KINDS",
    "WORKLOADS",
    "EcnSpec",
    "ExperimentSpec",
    "LinkOverride",
    "Workload",
    "apply_overrides",
    "expand",
    "load_spec",
    "spec_from_dict",
]

SWITCH_KINDS = ("softswitch", "ebpf", "bmv2", "linux-router")
CC_MODES = cc_registry.names()  # the registry's choice at import; specs check it live
RECOVERY_MODES = ("gbn", "sr", "fec")
WORKLOADS = ("p2p", "incast", "alltoall", "allreduce", "kvcache")
_SIZE = re.compile(r"^(\d+[KMG]?|fixed:\d+[KMG]?|uniform:\d+[KMG]?:\d+[KMG]?|cdf:\S+)$")
_RATE = re.compile(r"^\d+(\.\d+)?[KMG]?$")
_TOP_KEYS = ("name", "topology", "switch", "links", "workload", "cc", "recovery", "fec",
             "duration_s", "sample_interval_s", "seed", "sweep", "description", "program",
             "ecn", "faults", "rogue", "hpcc", "controller_max_rate")
_ROGUE_KEYS = ("rate", "duration_s", "start_s")
_HPCC_KEYS = ("eta", "max_stage", "w_ai", "base_rtt_s", "min_base_rtt_s", "multi_rate",
              "window", "pacing_burst_pkts")
_ECN_KEYS = ("kmin_bytes", "kmax_bytes", "pmax")
_WORKLOAD_KEYS = ("kind", "hosts", "size", "count", "qps", "rate", "mtu", "window",
                  "prefill", "timeout_s", "rto_min_s", "engine")
ENGINES = ("auto", "native", "python")  # traffic.native_endpoint.ENGINES
_LINK_KEYS = ("delay_ms", "jitter_ms", "rate_mbps", "loss", "queue_pkts")
_LOSS_KEYS = ("model", "p", "r", "h", "k", "mean", "burst_pkts")


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkOverride:
    """Changes to one topology link; ``None`` keeps the topology's value."""

    link: str
    delay_ms: float | None = None
    jitter_ms: float | None = None
    rate_mbps: float | None = None
    queue_pkts: int | None = None
    loss: LossModel | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A ``python -m traffic`` workload run on the named hosts (rank order)."""

    kind: str
    hosts: tuple[str, ...]
    size: str = "64K"
    count: int = 10
    qps: int = 1
    rate: str = "100M"
    mtu: int = 1024
    window: int | None = None
    prefill: int | None = None
    timeout_s: float | None = None
    rto_min_s: float | None = None   # --rto-min of every rank (None: traffic's default)
    engine: str = "auto"             # --engine: native (C engine), python, auto (native if built)


@dataclass(frozen=True, slots=True, kw_only=True)
class EcnSpec:
    """RED-style ECN marking on every P4 switch port (the congestion point of DCQCN):
    no mark up to ``kmin_bytes`` queued, probability rising to ``pmax`` at
    ``kmax_bytes``, every packet from there on.  Given to the controller as ``--ecn``."""

    kmin_bytes: int
    kmax_bytes: int
    pmax: float

    @property
    def argument(self) -> str:
        return f"{self.kmin_bytes}:{self.kmax_bytes}:{self.pmax:g}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RogueSpec:
    """A keyless host flooding forged feedback, host records and Telemetry Reports
    (``rate`` messages/s of each kind, 0: none) from ``start_s`` after the senders
    start, for ``duration_s`` (``mininet_topos.experiment.rogue``)."""

    rate: float = 5000.0
    duration_s: float = 10.0
    start_s: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSpec:
    """One runnable experiment (no sweep left: see :func:`expand`)."""

    name: str
    topology: str
    switch: str = "linux-router"
    links: tuple[LinkOverride, ...] = ()
    workload: Workload
    cc: str = "none"
    recovery: str = "sr"
    fec: str = "auto"
    duration_s: float = 60.0
    sample_interval_s: float = 0.2
    seed: int = 1
    program: str = "p4/int_rocev2.p4"
    description: str = ""
    ecn: EcnSpec | None = None   # None: the controller's default profile
    faults: tuple[Mapping[str, Any], ...] = ()   # mininet_topos.faults.spec, checked
                                                 # against the topology by apply_overrides
    rogue: RogueSpec | None = None   # a forging host during the workload (P4 switches)
    hpcc: HpccSettings = field(default_factory=HpccSettings)  # cc: hpcc-sender's parameters
    # cc: hpcc's max rate ("5M"): senders the controller must not raise to their host
    # link's rate (a Python softswitch forwards a fraction of it); None: the link's rate
    controller_max_rate: str | None = None
    variant: str = ""         # "cc=hpcc,recovery=fec" for a sweep member, "" otherwise
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def fec_km(self) -> tuple[int, int] | None:
        """(k, m) when ``fec`` is fixed, None for "auto"."""
        if self.fec == "auto":
            return None
        k, m = self.fec.split(",")
        return int(k), int(m)


def _where(path: str) -> str:
    return f"experiment spec: {path}"


def _check_keys(path: str, raw: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{_where(path)}: expected a mapping, got {type(raw).__name__} {raw!r}")
    for key in raw:
        if key not in allowed:
            raise SpecError(f"{_where(path)}: unknown field {key!r} (allowed: "
                            f"{', '.join(allowed)})" + did_you_mean(str(key), allowed))
    return raw


def _choice(path: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SpecError(f"{_where(path)} = {value!r}: not one of {', '.join(allowed)}"
                        + did_you_mean(str(value), allowed))
    return str(value)


def _number(path: str, value: Any, lo: float, hi: float, *, integer: bool = False) -> Any:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        kind = "an integer" if integer else "a number"
        raise SpecError(f"{_where(path)} = {value!r}: expected {kind}")
    if not lo <= value <= hi:
        raise SpecError(f"{_where(path)} = {value!r}: outside {lo:g}..{hi:g}")
    return int(value) if integer else float(value)


def _loss(path: str, raw: Any) -> LossModel:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return LossModel.bernoulli(_number(path, raw, 0.0, 0.99))
    raw = _check_keys(path, raw, _LOSS_KEYS)
    model = _choice(f"{path}.model", raw.get("model", "bernoulli"),
                    ("none", "bernoulli", "bursty", "gilbert-elliott"))
    if model == "none":
        return LossModel.none()
    if model == "bernoulli":
        return LossModel.bernoulli(_number(f"{path}.p", raw.get("p", raw.get("mean", 0.0)),
                                           0.0, 0.99))
    if model == "bursty":
        mean = _number(f"{path}.mean", raw.get("mean", 0.01), 0.0, 0.99)
        burst = _number(f"{path}.burst_pkts", raw.get("burst_pkts", 3.0), 1.0, 1000.0)
        return LossModel.bursty(mean, burst)
    vals = {k: _number(f"{path}.{k}", raw.get(k, d), 0.0, 1.0)
            for k, d in (("p", 0.0), ("r", 1.0), ("h", 0.0), ("k", 1.0))}
    return LossModel.gilbert_elliott(**vals)


def _link(name: Any, raw: Any) -> LinkOverride:
    path = f"links[{name!r}]"
    if not isinstance(name, str) or "-" not in name:
        raise SpecError(f"{_where(path)}: a link is named 'a:port-b:port' (e.g. 's1:3-s5:3')")
    raw = _check_keys(path, raw, _LINK_KEYS)
    kw: dict[str, Any] = {"link": name}
    for key, hi in (("delay_ms", 10_000.0), ("jitter_ms", 1_000.0), ("rate_mbps", 100_000.0)):
        if key in raw:
            kw[key] = _number(f"{path}.{key}", raw[key], 0.0, hi)
    if "queue_pkts" in raw:
        kw["queue_pkts"] = _number(f"{path}.queue_pkts", raw["queue_pkts"], 1, 1 << 19,
                                   integer=True)
    if "loss" in raw:
        kw["loss"] = _loss(f"{path}.loss", raw["loss"])
    return LinkOverride(**kw)


def _workload(raw: Any) -> Workload:
    raw = _check_keys("workload", raw, _WORKLOAD_KEYS)
    kind = _choice("workload.kind", raw.get("kind"), WORKLOADS)
    hosts = raw.get("hosts")
    if (not isinstance(hosts, list) or len(hosts) < 2
            or not all(isinstance(h, str) for h in hosts)):
        raise SpecError(f"{_where('workload.hosts')} = {hosts!r}: expected a list of at least "
                        "two host names, in rank order")
    if len(set(hosts)) != len(hosts):
        raise SpecError(f"{_where('workload.hosts')} = {hosts!r}: a host is listed twice")
    kw: dict[str, Any] = {"kind": kind, "hosts": tuple(hosts)}
    if "size" in raw:
        size = str(raw["size"])
        if not _SIZE.match(size):
            raise SpecError(f"{_where('workload.size')} = {size!r}: expected 4096, 64K, "
                            "fixed:1M, uniform:1K:1M or cdf:FILE")
        kw["size"] = size
    if "rate" in raw:
        rate = str(raw["rate"])
        if not _RATE.match(rate):
            raise SpecError(f"{_where('workload.rate')} = {rate!r}: expected bit/s like 100M")
        kw["rate"] = rate
    for key, lo, hi in (("count", 1, 1_000_000), ("qps", 1, 64), ("mtu", 256, 9000),
                        ("window", 1, 1 << 16), ("prefill", 1, 1000)):
        if key in raw:
            kw[key] = _number(f"workload.{key}", raw[key], lo, hi, integer=True)
    if "timeout_s" in raw:
        kw["timeout_s"] = _number("workload.timeout_s", raw["timeout_s"], 1.0, 86400.0)
    if "rto_min_s" in raw:
        kw["rto_min_s"] = _number("workload.rto_min_s", raw["rto_min_s"], 0.001, 10.0)
    if "engine" in raw:
        kw["engine"] = _choice("workload.engine", raw["engine"], ENGINES)
    return Workload(**kw)


def _ecn(raw: Any) -> EcnSpec:
    raw = _check_keys("ecn", raw, _ECN_KEYS)
    for key in _ECN_KEYS:
        if key not in raw:
            raise SpecError(f"{_where('ecn')}: missing {key!r} (give kmin_bytes, kmax_bytes "
                            "and pmax)")
    kmin = _number("ecn.kmin_bytes", raw["kmin_bytes"], 0, 2**32 - 1, integer=True)
    kmax = _number("ecn.kmax_bytes", raw["kmax_bytes"], 0, 2**32 - 1, integer=True)
    if kmax < kmin:
        raise SpecError(f"{_where('ecn.kmax_bytes')} = {kmax}: below kmin_bytes ({kmin})")
    return EcnSpec(kmin_bytes=kmin, kmax_bytes=kmax,
                   pmax=_number("ecn.pmax", raw["pmax"], 0.0, 1.0))


def _hpcc(raw: Any) -> HpccSettings:
    raw = _check_keys("hpcc", raw, _HPCC_KEYS)
    kw: dict[str, Any] = {}
    for key, lo, hi in (("eta", 0.0, 1.0), ("w_ai", 0.0, 1.0), ("base_rtt_s", 1e-6, 60.0),
                        ("min_base_rtt_s", 1e-6, 60.0), ("pacing_burst_pkts", 1.0, 64.0)):
        if raw.get(key) is not None:
            kw["w_ai_fraction" if key == "w_ai" else key] = _number(f"hpcc.{key}", raw[key],
                                                                    lo, hi)
    if "max_stage" in raw:
        kw["max_stage"] = _number("hpcc.max_stage", raw["max_stage"], 0, 1000, integer=True)
    for key in ("multi_rate", "window"):
        if key in raw:
            if not isinstance(raw[key], bool):
                raise SpecError(f"{_where('hpcc.' + key)} = {raw[key]!r}: expected true or false")
            kw[key] = raw[key]
    try:
        return HpccSettings(**kw)
    except ConfigError as exc:
        raise SpecError(f"{_where('hpcc')}: {exc}") from None


def spec_from_dict(raw: Any, *, base_dir: Path | None = None, variant: str = "") -> ExperimentSpec:
    """Check ``raw`` (a parsed spec without a sweep) and build the spec."""
    raw = _check_keys("top level", raw, _TOP_KEYS)
    if "sweep" in raw:
        raise SpecError(f"{_where('sweep')}: expand the spec first (mininet_topos.experiment."
                        "expand)")
    for key in ("name", "topology", "workload"):
        if key not in raw:
            raise SpecError(f"{_where(key)}: missing (required fields: name, topology, workload)")
    name = raw["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
        raise SpecError(f"{_where('name')} = {name!r}: use 1-64 letters, digits, '_', '.', '-'")
    topo = str(raw["topology"])
    if base_dir is not None and topo.endswith((".yaml", ".yml", ".json")):
        p = Path(topo)
        if not p.is_absolute() and (base_dir / p).exists():
            topo = str(base_dir / p)
    links_raw = raw.get("links", {}) or {}
    if not isinstance(links_raw, Mapping):
        raise SpecError(f"{_where('links')}: expected a mapping of link name -> changes")
    kw: dict[str, Any] = {
        "name": name, "topology": topo, "workload": _workload(raw["workload"]),
        "links": tuple(_link(k, v) for k, v in links_raw.items()),
        "switch": _choice("switch", raw.get("switch", "linux-router"), SWITCH_KINDS),
        "cc": _choice("cc", raw.get("cc", "none"), cc_registry.names()),
        "recovery": _choice("recovery", raw.get("recovery", "sr"), RECOVERY_MODES),
        "variant": variant, "raw": copy.deepcopy(dict(raw)),
    }
    fec = str(raw.get("fec", "auto")).replace(" ", "")
    if fec != "auto":
        m = re.fullmatch(r"(\d+),(\d+)", fec)
        if not m or not (1 <= int(m[1]) <= 255 and 0 <= int(m[2]) <= 255 - int(m[1])):
            raise SpecError(f"{_where('fec')} = {raw.get('fec')!r}: expected 'auto' or 'K,M' "
                            "with 1 <= K and K + M <= 255")
    kw["fec"] = fec
    if "duration_s" in raw:
        kw["duration_s"] = _number("duration_s", raw["duration_s"], 1.0, 86400.0)
    if raw.get("controller_max_rate") is not None:
        rate = str(raw["controller_max_rate"])
        try:   # the controller's --max-rate parser: a value it refuses fails here
            parse_rate(rate)
        except ConfigError as exc:
            raise SpecError(f"{_where('controller_max_rate')}: {exc}") from None
        kw["controller_max_rate"] = rate
    if "sample_interval_s" in raw:
        kw["sample_interval_s"] = _number("sample_interval_s", raw["sample_interval_s"],
                                          0.02, 60.0)
    if "seed" in raw:
        kw["seed"] = _number("seed", raw["seed"], 0, 2**31 - 1, integer=True)
    for key in ("description", "program"):
        if key in raw:
            kw[key] = str(raw[key])
    if raw.get("ecn") is not None:
        kw["ecn"] = _ecn(raw["ecn"])
    if raw.get("rogue") is not None:
        r = _check_keys("rogue", raw["rogue"], _ROGUE_KEYS)
        kw["rogue"] = RogueSpec(**{k: _number(f"rogue.{k}", r[k], *lim) for k, lim in (
            ("rate", (0.0, 50_000.0)), ("duration_s", (0.1, 600.0)), ("start_s", (0.0, 600.0)))
            if k in r})
    faults = raw.get("faults") or []
    if not isinstance(faults, list) or not all(isinstance(f, Mapping) for f in faults):
        raise SpecError(f"{_where('faults')}: expected a list of fault mappings "
                        "(see mininet_topos/faults/spec.py)")
    kw["faults"] = tuple(dict(f) for f in faults)
    if raw.get("hpcc") is not None:
        kw["hpcc"] = _hpcc(raw["hpcc"])
    return ExperimentSpec(**kw)


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node: Any = raw
    for i, key in enumerate(keys[:-1]):
        if not isinstance(node, dict):
            raise SpecError(f"{_where('sweep')}: {dotted!r}: {'.'.join(keys[:i])} is not a "
                            "mapping")
        node = node.setdefault(key, {})
    if not isinstance(node, dict):
        raise SpecError(f"{_where('sweep')}: {dotted!r}: parent is not a mapping")
    node[keys[-1]] = value


def expand(raw: Any, *, base_dir: Path | None = None) -> list[ExperimentSpec]:
    """One checked spec per combination of the ``sweep`` values (one spec without one).

    Sweep keys are dotted paths into the spec (``cc``, ``recovery``,
    ``links.s1:3-s5:3.loss.mean``); a key of several comma-separated paths sets all of
    them to the same value (``links.A.loss.p,links.B.loss.p``).
    """
    raw = _check_keys("top level", raw, _TOP_KEYS)
    sweep = raw.get("sweep")
    base = {k: v for k, v in raw.items() if k != "sweep"}
    if sweep is None:
        return [spec_from_dict(base, base_dir=base_dir)]
    if not isinstance(sweep, Mapping) or not sweep:
        raise SpecError(f"{_where('sweep')} = {sweep!r}: expected a mapping field -> list")
    keys = list(sweep)
    for key in keys:
        vals = sweep[key]
        if not isinstance(vals, list) or not vals:
            raise SpecError(f"{_where(f'sweep.{key}')} = {vals!r}: expected a non-empty list")
    out = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        member = copy.deepcopy(base)
        for keys_, val in zip(keys, combo, strict=True):
            for key in keys_.split(","):
                key = key.strip()
                if key.startswith("links."):
                    link, _, rest = key[len("links."):].partition(".")
                    if not rest:
                        raise SpecError(f"{_where(f'sweep.{keys_}')}: name a field of link "
                                        f"{link!r} (e.g. links.{link}.loss.p)")
                    links = member.setdefault("links", {})
                    _set_path(links.setdefault(link, {}), rest, val)
                else:
                    _set_path(member, key, val)
        variant = ",".join(f"{k.split(',')[0].rsplit('.', 1)[-1]}={v}"
                           for k, v in zip(keys, combo, strict=True))
        out.append(spec_from_dict(member, base_dir=base_dir, variant=variant))
    return out


def load_spec(path: str | Path) -> list[ExperimentSpec]:
    """Read a spec file (YAML or JSON) and :func:`expand` it; errors name the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"experiment spec {p}: cannot read ({exc.strerror})") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"experiment spec {p}: not valid YAML: {exc}") from exc
    try:
        return expand(raw, base_dir=p.resolve().parent)
    except SpecError as exc:
        raise SpecError(f"{p}: {exc}") from exc


def apply_overrides(topo: Topology, spec: ExperimentSpec) -> Topology:
    """``topo`` with the spec's link changes applied; checks that hosts and links exist."""
    import dataclasses

    for h in spec.workload.hosts:
        if h not in topo.host_names:
            raise SpecError(f"{_where('workload.hosts')}: no host {h!r} in topology {topo.name}"
                            + did_you_mean(h, topo.host_names))
    links = list(topo.links)
    for ov in spec.links:
        try:
            target = topo.link(ov.link)
        except TopologyError as exc:
            raise SpecError(f"{_where(f'links[{ov.link!r}]')}: {exc}") from exc
        changes = {k: getattr(ov, k) for k in ("delay_ms", "jitter_ms", "rate_mbps",
                                               "queue_pkts", "loss")
                   if getattr(ov, k) is not None}
        links = [dataclasses.replace(ln, **changes) if ln is target else ln for ln in links]
    out = dataclasses.replace(topo, links=tuple(links))
    if spec.faults:
        from mininet_topos.faults.in_spec import check_spec_faults
        from mininet_topos.faults.spec import FaultError
        try:
            check_spec_faults(spec.faults, out, nranks=len(spec.workload.hosts),
                              switch=spec.switch)
        except FaultError as exc:
            raise SpecError(str(exc)) from None
    return out
