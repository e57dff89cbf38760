"""Test harness for p4/int_rocev2.p4 on the softswitch: switches, chains, frames.

One ``IntSwitch`` is the program loaded into a softswitch ``V1Switch`` plus its
runtime API, with methods that install the control-plane entries README.md
documents. ``Chain`` wires N switches in a line (h1 - s1 - ... - sN - h2), as a
path through a fabric: s1 port 1 faces h1, sN port 2 faces h2, every other port is
a fabric port with link sequence numbers. Decoding in the tests is independent of
the program: struct offsets from formats/FORMATS.md and the formats package.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from formats import roce

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4" / "int_rocev2.p4"

# Constants of the program (p4/include/defines.p4, p4/README.md).
INT_UDP_PORT = 7777
ROCEV2_UDP_PORT = 4791
REPORT_CLONE_SESSION = 500
HPCC_INST = 0x9400
HPCC_DS = 0xE000
DS_ID_HPCC = 0x4850
ETH_LINK_SEQ = 0x88B5

DROP = {"parser_error": 1, "checksum": 2, "ttl": 3, "no_route": 4, "arp": 5, "not_ip": 6,
        "ipv4_malformed": 7, "int_malformed": 8, "report": 9}
EV = {"source_insert": 1, "transit_push": 2, "hop_exhausted": 3, "stack_full": 4,
      "mtu_skip_source": 5, "mtu_skip_transit": 6, "sink_strip": 7, "sink_host": 8,
      "report_sent": 9, "report_too_long": 10, "report_no_collector": 11,
      "bad_shim_truncated": 12, "bad_shim_len": 13, "unsupported_type": 14,
      "bad_version": 15, "bad_hop_ml": 16, "report_sampled_out": 17, "fragment": 18}

H1_IP, H2_IP = "10.0.1.1", "10.0.2.1"
H1_MAC, H2_MAC = "02:00:00:00:01:01", "02:00:00:00:02:01"
COLLECTOR_IP, COLLECTOR_MAC = "10.0.9.9", "02:00:00:00:09:09"


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def ip_int(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def switch_mac(node_id: int) -> str:
    return f"02:aa:00:00:00:{node_id:02x}"


def switch_ip(node_id: int) -> str:
    return f"10.0.0.{node_id}"


def load_checked(defines: dict[str, str] | None = None) -> Any:
    """The checked syntax tree of int_rocev2.p4 (parse once, compile per switch)."""
    from softswitch.frontend.load import load_program
    return load_program(PROGRAM, defines=defines)


def compile_program(checked: Any) -> Any:
    """A fresh compiled program (own tables and registers) from a checked tree."""
    from softswitch.backends.python.program import compile_program as _compile
    from softswitch.v1model import V1MODEL
    return _compile(checked, V1MODEL)


def roce_frame(*, src: str = H1_IP, dst: str = H2_IP, sport: int = 0xC001, psn: int = 7,
               payload: bytes = bytes(range(64)), dest_qp: int = 0x11, tos: int = 0,
               eth_src: str = H1_MAC, eth_dst: str = "02:aa:00:00:00:01", ttl: int = 64,
               dport: int = ROCEV2_UDP_PORT) -> bytes:
    """A RoCEv2 SEND_ONLY frame as a host sends it (ICRC valid)."""
    return roce.build_frame(eth_src=eth_src, eth_dst=eth_dst, src=src, dst=dst, sport=sport,
                            opcode=roce.Opcode.SEND_ONLY, dest_qp=dest_qp, psn=psn,
                            payload=payload, tos=tos, ttl=ttl, dport=dport)


def routed(frame: bytes, hops: int, *, dst_mac: str = H2_MAC, last_node: int = 1) -> bytes:
    """``frame`` after ``hops`` routers: MACs of the last one, TTL - hops, checksum fixed."""
    out = bytearray(frame)
    out[0:6] = bytes.fromhex(dst_mac.replace(":", ""))
    out[6:12] = bytes.fromhex(switch_mac(last_node).replace(":", ""))
    out[14 + 8] -= hops
    out[14 + 10:14 + 12] = b"\0\0"
    out[14 + 10:14 + 12] = struct.pack("!H", roce.ipv4_checksum(bytes(out[14:34])))
    return bytes(out)


def ipv4_checksum_ok(ip_header: bytes) -> bool:
    total = sum(struct.unpack(f"!{len(ip_header) // 2}H", ip_header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


@dataclasses.dataclass(slots=True)
class IntSwitch:
    """One switch running int_rocev2.p4, with methods for the controller's entries."""

    node_id: int
    switch: Any
    runtime: Any
    clock: list[int]

    @classmethod
    def build(cls, node_id: int, program: Any) -> IntSwitch:
        from softswitch.runtime import SwitchRuntime
        from softswitch.targets.python.pipeline import V1Switch
        clock = [1000 * node_id]
        sw = V1Switch(program, clock_us=lambda: clock[0])
        rt = SwitchRuntime(program, sw.pre)
        s = cls(node_id=node_id, switch=sw, runtime=rt, clock=clock)
        rt.table_set_default("SwitchEgress.switch_config", "set_switch_config", [node_id])
        return s

    # ---- packets
    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.switch.process(port, frame)

    # ---- control plane
    def route(self, prefix: str, plen: int, port: int, dst_mac: str) -> None:
        from softswitch.tables import Lpm
        self.runtime.table_add("SwitchIngress.ipv4_lpm", [Lpm(ip_int(prefix), plen)],
                               "ipv4_forward",
                               [port, mac_int(switch_mac(self.node_id)), mac_int(dst_mac)])

    def watch(self, *, inst: int = HPCC_INST, ds: int = HPCC_DS, max_hops: int = 8,
              dst_port: tuple[int, int] = (ROCEV2_UDP_PORT, 0xFFFF),
              src_addr: tuple[int, int] = (0, 0), priority: int = 10) -> None:
        from softswitch.tables import Ternary
        key = [Ternary(src_addr[0], src_addr[1]), Ternary(0, 0), Ternary(0, 0),
               Ternary(dst_port[0], dst_port[1]), Ternary(0, 0)]
        self.runtime.table_add("SwitchIngress.int_watchlist", key, "int_source",
                               [inst, ds, max_hops], priority=priority)

    def sink(self, port: int, mode: str) -> None:
        from softswitch.tables import Exact
        self.runtime.table_add("SwitchIngress.int_sink", [Exact(port)], f"sink_{mode}", [])

    def fabric(self, port: int) -> None:
        from softswitch.tables import Exact
        self.runtime.table_add("SwitchEgress.fabric_port", [Exact(port)], "set_fabric", [])

    def line_rate(self, port: int, mbps: int) -> None:
        from softswitch.tables import Exact
        self.runtime.table_add("SwitchEgress.port_line_rate", [Exact(port)], "set_line_rate",
                               [mbps])

    def mtu(self, port: int, mtu: int) -> None:
        from softswitch.tables import Exact
        self.runtime.table_add("SwitchEgress.port_mtu", [Exact(port)], "set_mtu", [mtu])

    def ecn(self, port: int, kmin: int, kmax: int, pmax: int) -> None:
        from softswitch.tables import Exact
        self.runtime.table_add("SwitchEgress.ecn_config", [Exact(port)], "set_ecn_thresholds",
                               [kmin, kmax, pmax])

    def arp(self, target_ip: str) -> None:
        from softswitch.tables import Exact
        self.runtime.table_add("SwitchIngress.arp_proxy", [Exact(ip_int(target_ip))],
                               "arp_reply", [mac_int(switch_mac(self.node_id))])

    def report_to(self, port: int, *, payload_bytes: int = 12, hw_id: int = 5,
                  collector_port: int = 32766, collector_mac: str = COLLECTOR_MAC,
                  collector_ip: str = COLLECTOR_IP) -> None:
        from softswitch.v1model.pre import Replica
        self.runtime.table_set_default(
            "SwitchEgress.report_config", "set_report_config",
            [mac_int(switch_mac(self.node_id)), mac_int(collector_mac),
             ip_int(switch_ip(self.node_id)), ip_int(collector_ip), collector_port,
             payload_bytes, hw_id])
        self.runtime.clone_session_set(REPORT_CLONE_SESSION, [Replica(port=port, rid=0)])

    # ---- state
    def reg(self, name: str, index: int = 0) -> int:
        return self.runtime.register_read(name, index)

    def set_reg(self, name: str, index: int, value: int) -> None:
        self.runtime.register_write(name, index, value)

    def event(self, name: str) -> int:
        return self.runtime.counter_read("int_events", EV[name])[0]

    def drops(self, name: str) -> int:
        return self.runtime.counter_read("drop_reasons", DROP[name])[0]

    def digests(self) -> list[tuple[Any, ...]]:
        return self.runtime.digest_pop("link_loss_digest_t")


@dataclasses.dataclass(slots=True)
class Chain:
    """h1 - s1 - s2 - ... - sN - h2; port 1 faces h1, port 2 faces h2 on every switch."""

    switches: list[IntSwitch]

    @classmethod
    def build(cls, n: int, make_program: Callable[[], Any], *, sink_mode: str = "host",
              watch: dict[str, Any] | None = None) -> Chain:
        sws = [IntSwitch.build(i + 1, make_program()) for i in range(n)]
        for i, s in enumerate(sws):
            to_h2 = H2_MAC if i == n - 1 else switch_mac(i + 2)
            to_h1 = H1_MAC if i == 0 else switch_mac(i)
            s.route("10.0.2.0", 24, 2, to_h2)
            s.route("10.0.1.0", 24, 1, to_h1)
            if i > 0:
                s.fabric(1)
            if i < n - 1:
                s.fabric(2)
            s.line_rate(1, 100_000)
            s.line_rate(2, 25_000 + i)
            s.mtu(1, 9000)
            s.mtu(2, 9000)
        sws[0].watch(**(watch or {}))
        sws[-1].sink(2, sink_mode)
        return cls(switches=sws)

    def send(self, frame: bytes, *, step_us: int = 3) -> list[tuple[int, bytes]]:
        """h1 -> h2: what leaves sN towards h2 (port 2) plus reports of any switch."""
        out: list[tuple[int, bytes]] = []
        pending = [frame]
        for i, s in enumerate(self.switches):
            s.clock[0] += step_us
            nxt: list[bytes] = []
            for f in pending:
                for port, data in s.process(1, f):
                    if port == 2 and i < len(self.switches) - 1:
                        nxt.append(data)
                    else:
                        out.append((port, data))
            pending = nxt
        return out


def split_int(frame: bytes) -> dict[str, Any]:
    """Independent decoder of an Eth/IPv4/UDP/INT frame (formats/FORMATS.md offsets)."""
    eth_type, = struct.unpack_from("!H", frame, 12)
    off = 14
    if eth_type == ETH_LINK_SEQ:
        off += 6
    ip = frame[off:off + 20]
    total_len, = struct.unpack_from("!H", ip, 2)
    udp_off = off + 20
    sport, dport, ulen, ucsum = struct.unpack_from("!HHHH", frame, udp_off)
    out: dict[str, Any] = {"l3": off, "ip": ip, "ip_total_len": total_len, "ttl": ip[8],
                           "ecn": ip[1] & 3, "udp": (sport, dport, ulen, ucsum)}
    if dport != INT_UDP_PORT:
        return out
    s = udp_off + 8
    tnr, words, orig = struct.unpack_from("!BBH", frame, s)
    w0, inst, ds_id, ds_ins, ds_flags = struct.unpack_from("!IHHHH", frame, s + 4)
    out.update(shim_type=tnr >> 4, npt=(tnr >> 2) & 3, shim_len=words, orig_dport=orig,
               ver=w0 >> 28, d=(w0 >> 27) & 1, e=(w0 >> 26) & 1, m=(w0 >> 25) & 1,
               hop_ml=(w0 >> 8) & 0x1F, rhc=w0 & 0xFF, inst=inst, ds_id=ds_id, ds=ds_ins,
               ds_flags=ds_flags, stack=frame[s + 16:s + 4 + words * 4],
               after=frame[s + 4 + words * 4:])
    return out


def decode_report(frame: bytes) -> dict:
    """Independent Telemetry Report v2.0 decoder (formats/FORMATS.md)."""
    r: dict = {}
    r["eth_dst"], r["eth_src"], r["eth_type"] = frame[0:6], frame[6:12], frame[12:14]
    ip = frame[14:34]
    r["ip_ok"] = ipv4_checksum_ok(ip)
    r["ip_total_len"], = struct.unpack_from("!H", ip, 2)
    r["ttl"], r["proto"] = ip[8], ip[9]
    r["ip_src"], r["ip_dst"] = struct.unpack_from("!II", ip, 12)
    r["sport"], r["dport"], r["udp_len"], r["udp_csum"] = struct.unpack_from("!HHHH", frame, 34)
    w0, r["node_id"] = struct.unpack_from("!II", frame, 42)
    r["ver"], r["hw_id"], r["seq"] = w0 >> 28, (w0 >> 22) & 0x3F, w0 & 0x3FFFFF
    types, r["rep_len"], r["md_len"], flags = struct.unpack_from("!BBBB", frame, 50)
    r["rep_type"], r["in_type"] = types >> 4, types & 0xF
    r["d"], r["q"], r["f"], r["i"] = flags >> 7, (flags >> 6) & 1, (flags >> 5) & 1, (flags >> 4) & 1
    (r["rep_md_bits"], r["ds_id"], r["ds_md_bits"],
     r["ds_md_status"]) = struct.unpack_from("!HHHH", frame, 54)
    md_end = 62 + r["md_len"] * 4
    r["md"] = frame[62:md_end]
    r["inner"] = frame[md_end:]
    return r


_HOP_FIELDS = (  # (instruction mask, DS?, bytes, field names)
    (0x8000, False, 4, ("node_id",)),
    (0x4000, False, 4, ("ingress_port", "egress_port")),
    (0x2000, False, 4, ("hop_latency",)),
    (0x1000, False, 4, ("queue_id", "queue_occupancy")),
    (0x0800, False, 8, ("ingress_ts",)),
    (0x0400, False, 8, ("egress_ts",)),
    (0x0100, False, 4, ("tx_util",)),
    (0x8000, True, 4, ("tx_bytes",)),
    (0x4000, True, 4, ("queue_bytes",)),
    (0x2000, True, 4, ("line_rate",)),
)


def decode_hop_words(stack: bytes, inst: int, ds: int, hop_ml: int) -> list[dict[str, int]]:
    """Hop records (newest first) decoded field by field from the bitmaps."""
    hops = []
    for k in range(0, len(stack), hop_ml * 4):
        rec = stack[k:k + hop_ml * 4]
        o = 0
        h: dict[str, int] = {}
        for mask, is_ds, size, names in _HOP_FIELDS:
            if not (ds if is_ds else inst) & mask:
                continue
            v = int.from_bytes(rec[o:o + size], "big")
            o += size
            if names == ("ingress_port", "egress_port"):
                h["ingress_port"], h["egress_port"] = v >> 16, v & 0xFFFF
            elif names == ("queue_id", "queue_occupancy"):
                h["queue_id"], h["queue_occupancy"] = v >> 24, v & 0xFFFFFF
            else:
                h[names[0]] = v
        assert o == hop_ml * 4, f"hop record of {hop_ml} words, bitmaps fill {o} bytes"
        hops.append(h)
    return hops


def strip_link_seq(frame: bytes) -> bytes:
    """The frame without its link sequence header (if any)."""
    if struct.unpack_from("!H", frame, 12)[0] != ETH_LINK_SEQ:
        return frame
    return frame[:12] + frame[18:20] + frame[20:]


def with_link_seq(frame: bytes, seq: int) -> bytes:
    """``frame`` with a link sequence header pushed after Ethernet."""
    return frame[:12] + struct.pack("!HIH", ETH_LINK_SEQ, seq,
                                    struct.unpack_from("!H", frame, 12)[0]) + frame[14:]


def hexdump_diff(a: bytes, b: bytes) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at byte {i}: {x:#04x} != {y:#04x} (lengths {len(a)}, {len(b)})"
    return f"lengths {len(a)} != {len(b)}"


__all__: Sequence[str] = [
    "Chain",
    "IntSwitch",
    "compile_program",
    "decode_hop_words",
    "ipv4_checksum_ok",
    "load_checked",
    "roce_frame",
    "split_int",
    "strip_link_seq",
    "with_link_seq",
]
