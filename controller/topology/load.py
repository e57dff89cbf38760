"""Read and write topology files (YAML or JSON) with precise errors.

File format (YAML shown; JSON is the same mapping)::

    name: leaf-spine
    link_defaults:                # optional, per link role
      host:   {rate_mbps: 100, mtu: 1500}
      fabric: {rate_mbps: 100, mtu: 2000}
    switches:
      - {name: s1, device_id: 1, grpc_addr: "127.0.0.1:50001", cpu_port: 510,
         role: spine, node_id: 1}
    hosts:
      - {name: h1, ip: 10.0.1.1/24, mac: "00:00:0a:00:01:01", switch: s3, port: 1}
    links:
      - {a: "s1:1", b: "s3:3", role: fabric, rate_mbps: 100, delay_ms: 0, mtu: 2000}
      - {a: "s5:4", b: "s9:4", role: wan, delay_ms: 10, jitter_ms: 1,
         loss: {model: gilbert-elliott, p: 0.003, r: 0.3, h: 0.0, k: 1.0}}

Host links may be listed (``a: h1`` or ``a: "h1:0"``) to set their shaping; a host
whose link is not listed gets one with the ``host`` defaults.  Reading never accepts a
key it does not know: a typo is an error with a suggestion, not a silent default.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from common.loss import LossKind, LossModel

from .errors import TopologyFormatError, did_you_mean
from .model import (
    DEFAULT_CPU_PORT,
    HOST_PORT,
    Endpoint,
    Host,
    Link,
    LinkRole,
    Switch,
    SwitchRole,
    SwitchTls,
    Topology,
)
from .validate import validate

__all__ = [
    "LINK_DEFAULTS",
    "dump_topology",
    "dumps_topology",
    "load_topology",
    "loads_topology",
    "topology_from_dict",
]

# Shaping defaults per link role.  Fabric/WAN MTUs leave room for the link sequence
# header and an 8-hop INT stack on top of a 1500-byte host packet.
LINK_DEFAULTS: Mapping[LinkRole, Mapping[str, Any]] = MappingProxyType({
    LinkRole.HOST: MappingProxyType({"rate_mbps": 100.0, "mtu": 1500, "queue_pkts": 64}),
    LinkRole.FABRIC: MappingProxyType({"rate_mbps": 100.0, "mtu": 2000, "queue_pkts": 64}),
    LinkRole.WAN: MappingProxyType({"rate_mbps": 100.0, "mtu": 2000, "queue_pkts": 64,
                                    "delay_ms": 10.0}),
})

_TOP_KEYS = frozenset({"name", "switches", "hosts", "links", "link_defaults"})
_SWITCH_KEYS = frozenset(
    {"name", "device_id", "grpc_addr", "cpu_port", "role", "node_id", "mac", "site", "tls"})
_TLS_KEYS = frozenset({"ca", "cert", "key", "server_name"})
_HOST_KEYS = frozenset({"name", "ip", "mac", "switch", "port", "gateway"})
_LINK_KEYS = frozenset(
    {"a", "b", "role", "rate_mbps", "delay_ms", "jitter_ms", "loss", "mtu", "queue_pkts"})
_SHAPING_KEYS = _LINK_KEYS - {"a", "b", "role"}
_LOSS_KEYS = MappingProxyType({
    LossKind.NONE: frozenset({"model"}),
    LossKind.BERNOULLI: frozenset({"model", "p"}),
    LossKind.GILBERT_ELLIOTT: frozenset({"model", "p", "r", "h", "k"}),
})


def _check_keys(where: str, obj: Any, allowed: frozenset[str] | set[str],
                required: frozenset[str] | set[str] = frozenset()) -> None:
    if not isinstance(obj, Mapping):
        raise TopologyFormatError(f"{where}: expected a mapping, got {type(obj).__name__} {obj!r}")
    for key in obj:
        if key not in allowed:
            raise TopologyFormatError(
                f"{where}: unknown field {key!r}{did_you_mean(str(key), allowed)}")
    for key in sorted(required):
        if key not in obj:
            raise TopologyFormatError(f"{where}: missing field {key!r}")


def _int(where: str, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyFormatError(f"{where}: field {field} must be an integer, got {value!r}")
    return value


def _float(where: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TopologyFormatError(f"{where}: field {field} must be a number, got {value!r}")
    return float(value)


def _str(where: str, field: str, value: Any) -> str:
    if field in ("mac", "ip", "gateway", "grpc_addr") and isinstance(value, (int, float)):
        raise TopologyFormatError(
            f"{where}: field {field} was read as the number {value!r}: YAML reads some "
            f"unquoted {field} values as numbers, put it in quotes")
    if not isinstance(value, str) or not value:
        raise TopologyFormatError(f"{where}: field {field} must be a non-empty string, "
                                  f"got {value!r}")
    return value


def _enum(where: str, field: str, value: Any, enum_cls: Any) -> Any:
    names = [str(m) for m in enum_cls]
    if value not in names:
        raise TopologyFormatError(
            f"{where}: field {field} is {value!r}, expected one of {', '.join(names)}"
            + did_you_mean(str(value), names))
    return enum_cls(value)


def _switch(i: int, raw: Any) -> Switch:
    where = f"switches[{i}]"
    _check_keys(where, raw, _SWITCH_KEYS, {"name", "device_id"})
    name = _str(where, "name", raw["name"])
    where = f"switch {name}"
    device_id = _int(where, "device_id", raw["device_id"])
    return Switch(
        name=name,
        device_id=device_id,
        grpc_addr=_str(where, "grpc_addr", raw.get("grpc_addr", f"127.0.0.1:{50000 + device_id}")),
        cpu_port=_int(where, "cpu_port", raw.get("cpu_port", DEFAULT_CPU_PORT)),
        role=_enum(where, "role", raw.get("role", "leaf"), SwitchRole),
        node_id=_int(where, "node_id", raw.get("node_id", device_id)),
        mac=_str(where, "mac", raw["mac"]) if "mac" in raw else "",
        site=_str(where, "site", raw["site"]) if "site" in raw else "",
        tls=_switch_tls(f"{where} tls", raw["tls"]) if raw.get("tls") is not None else None,
    )


def _switch_tls(where: str, raw: Any) -> SwitchTls:
    _check_keys(where, raw, _TLS_KEYS, {"ca"})
    tls = SwitchTls(**{k: _str(where, k, raw[k]) for k in _TLS_KEYS if k in raw})
    if bool(tls.cert) != bool(tls.key):
        raise TopologyFormatError(f"{where}: give both cert and key, or neither")
    return tls


def _host(i: int, raw: Any) -> Host:
    where = f"hosts[{i}]"
    _check_keys(where, raw, _HOST_KEYS, {"name", "ip", "mac", "switch", "port"})
    name = _str(where, "name", raw["name"])
    where = f"host {name}"
    return Host(
        name=name,
        ip=_str(where, "ip", raw["ip"]),
        mac=_str(where, "mac", raw["mac"]),
        switch=_str(where, "switch", raw["switch"]),
        port=_int(where, "port", raw["port"]),
        gateway=_str(where, "gateway", raw["gateway"]) if "gateway" in raw else "",
    )


def _endpoint(where: str, field: str, raw: Any, hosts: set[str]) -> Endpoint:
    if isinstance(raw, Mapping):
        _check_keys(f"{where} field {field}", raw, {"node", "port"}, {"node", "port"})
        return Endpoint(node=_str(where, field + ".node", raw["node"]),
                        port=_int(where, field + ".port", raw["port"]))
    if not isinstance(raw, str) or not raw:
        raise TopologyFormatError(f"{where}: field {field} must be 'node:port', got {raw!r}")
    node, sep, port = raw.partition(":")
    if not sep:
        if node in hosts:
            return Endpoint(node=node, port=HOST_PORT)
        raise TopologyFormatError(
            f"{where}: field {field} is {raw!r}: a switch end needs a port ('{raw}:1')")
    try:
        port_no = int(port)
    except ValueError:
        raise TopologyFormatError(
            f"{where}: field {field} is {raw!r}: port {port!r} is not an integer") from None
    return Endpoint(node=node, port=port_no)


def _loss(where: str, raw: Any) -> LossModel:
    if raw is None:
        return LossModel.none()
    if isinstance(raw, Mapping) and "model" not in raw:
        raise TopologyFormatError(f"{where}: field loss needs 'model' "
                                  "(none, bernoulli or gilbert-elliott)")
    _check_keys(f"{where} loss", raw, set().union(*_LOSS_KEYS.values()), {"model"})
    kind = _enum(where, "loss.model", raw["model"], LossKind)
    _check_keys(f"{where} loss ({kind})", raw, _LOSS_KEYS[kind])
    vals = {k: _float(where, f"loss.{k}", v) for k, v in raw.items() if k != "model"}
    if kind is LossKind.BERNOULLI:
        if "p" not in vals:
            raise TopologyFormatError(f"{where}: bernoulli loss needs p")
        return LossModel.bernoulli(vals["p"])
    if kind is LossKind.GILBERT_ELLIOTT:
        for needed in ("p", "r"):
            if needed not in vals:
                raise TopologyFormatError(f"{where}: gilbert-elliott loss needs {needed}")
        return LossModel.gilbert_elliott(**vals)
    return LossModel.none()


def _shaping(where: str, raw: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    merged.update({k: v for k, v in raw.items() if k in _SHAPING_KEYS})
    out: dict[str, Any] = {}
    for key in ("rate_mbps", "delay_ms", "jitter_ms"):
        if key in merged:
            out[key] = _float(where, key, merged[key])
    for key in ("mtu", "queue_pkts"):
        if key in merged:
            out[key] = _int(where, key, merged[key])
    if "loss" in merged:
        out["loss"] = merged["loss"] if isinstance(merged["loss"], LossModel) else _loss(
            where, merged["loss"])
    return out


def _link(i: int, raw: Any, hosts: set[str], defaults: Mapping[LinkRole, Mapping[str, Any]]
          ) -> Link:
    where = f"links[{i}]"
    _check_keys(where, raw, _LINK_KEYS, {"a", "b"})
    a = _endpoint(where, "a", raw["a"], hosts)
    b = _endpoint(where, "b", raw["b"], hosts)
    where = f"link {a}-{b}"
    if b.node in hosts and a.node not in hosts:  # keep the host end first, always
        a, b = b, a
    default_role = LinkRole.HOST if a.node in hosts else LinkRole.FABRIC
    role = _enum(where, "role", raw.get("role", str(default_role)), LinkRole)
    return Link(a=a, b=b, role=role, **_shaping(where, raw, defaults[role]))


def _defaults(raw: Any) -> dict[LinkRole, dict[str, Any]]:
    out = {role: dict(vals) for role, vals in LINK_DEFAULTS.items()}
    if raw is None:
        return out
    _check_keys("link_defaults", raw, {str(r) for r in LinkRole})
    for role_name, vals in raw.items():
        role = LinkRole(role_name)
        _check_keys(f"link_defaults.{role_name}", vals, _SHAPING_KEYS)
        out[role].update(vals)
    return out


def topology_from_dict(raw: Any, *, check: bool = True) -> Topology:
    """Build a topology from a parsed mapping; validated unless ``check`` is False."""
    _check_keys("topology", raw, _TOP_KEYS, {"name", "switches"})
    for key in ("switches", "hosts", "links"):
        if key in raw and not isinstance(raw[key], list):
            raise TopologyFormatError(f"topology: field {key} must be a list")
    defaults = _defaults(raw.get("link_defaults"))
    switches = tuple(_switch(i, s) for i, s in enumerate(raw["switches"]))
    hosts = tuple(_host(i, h) for i, h in enumerate(raw.get("hosts", [])))
    host_names = {h.name for h in hosts}
    links = [_link(i, ln, host_names, defaults) for i, ln in enumerate(raw.get("links", []))]
    linked = {ln.a.node for ln in links if ln.a.node in host_names}
    for h in hosts:
        if h.name not in linked:
            links.append(Link(a=Endpoint(node=h.name, port=HOST_PORT),
                              b=Endpoint(node=h.switch, port=h.port), role=LinkRole.HOST,
                              **_shaping(f"host {h.name} link", {}, defaults[LinkRole.HOST])))
    topo = Topology(name=_str("topology", "name", raw["name"]), switches=switches, hosts=hosts,
                    links=tuple(links))
    if check:
        validate(topo)
    return topo


def loads_topology(text: str, *, fmt: str = "yaml", source: str = "<string>",
                   check: bool = True) -> Topology:
    """Parse topology text; ``fmt`` is "yaml" or "json" (YAML also reads JSON)."""
    try:
        raw = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise TopologyFormatError(f"{source}: not valid {fmt.upper()}: {exc}") from exc
    try:
        return topology_from_dict(raw, check=check)
    except TopologyFormatError as exc:
        raise TopologyFormatError(f"{source}: {exc}") from None


def load_topology(path: str | os.PathLike[str], *, check: bool = True) -> Topology:
    """Read a ``.yaml``/``.yml``/``.json`` topology file and validate it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyFormatError(f"cannot read topology file {p}: {exc.strerror}") from exc
    fmt = "json" if p.suffix.lower() == ".json" else "yaml"
    return loads_topology(text, fmt=fmt, source=str(p), check=check)


def dumps_topology(topo: Topology, *, fmt: str = "yaml") -> str:
    """The topology as file text; reading it back gives an equal topology."""
    data = topo.to_dict()
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def dump_topology(topo: Topology, path: str | os.PathLike[str]) -> None:
    p = Path(path)
    fmt = "json" if p.suffix.lower() == ".json" else "yaml"
    p.write_text(dumps_topology(topo, fmt=fmt), encoding="utf-8")
