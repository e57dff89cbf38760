"""Writes the STF tests of p4/int_rocev2.p4 (tests/p4_int/*.stf) from the formats
package, so their expected bytes come from formats/FORMATS.md's Python side, not from the
program. Egress timestamps depend on the wall clock: their nibbles are wildcards.

    python tests/p4_int/make_stf.py
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # run as a script from anywhere

from formats import int_md
from tests.helpers.p4int import H2_MAC, HPCC_DS, HPCC_INST, roce_frame, switch_mac, with_link_seq

MAC1 = "0x" + switch_mac(1).replace(":", "")
H2 = "0x" + H2_MAC.replace(":", "")


def routed(frame: bytes, dst_mac: str, src_mac: str) -> bytes:
    from formats import roce
    out = bytearray(frame)
    out[0:6] = bytes.fromhex(dst_mac.replace(":", ""))
    out[6:12] = bytes.fromhex(src_mac.replace(":", ""))
    out[22] -= 1
    out[24:26] = b"\0\0"
    out[24:26] = struct.pack("!H", roce.ipv4_checksum(bytes(out[14:34])))
    return bytes(out)


def hexs(data: bytes) -> str:
    return data.hex()


def wild(hex_text: str, start: int, length: int) -> str:
    """Replace bytes [start, start+length) of a hex string by '*' nibbles."""
    return hex_text[:2 * start] + "*" * (2 * length) + hex_text[2 * (start + length):]


def common(node_id: int, sink: str) -> list[str]:
    return [
        f"setdefault SwitchEgress.switch_config set_switch_config(node_id:{node_id})",
        (f"add SwitchIngress.ipv4_lpm dst_addr:0x0a000200/24 "
        f"ipv4_forward(port:2, src_mac:{MAC1}, dst_mac:{H2})"),
        "add SwitchEgress.port_line_rate port:2 set_line_rate(line_rate_mbps:25000)",
        f"add SwitchIngress.int_sink egress_port:2 sink_{sink}()",
    ]


def source_stf() -> str:
    lines = ["# INT source + host-mode sink on one switch (HPCC bitmaps), then plain UDP.",
             *common(1, "host"),
             ("add SwitchIngress.int_watchlist 10 src_addr:0x******** dst_addr:0x******** "
             "src_port:0x**** dst_port:0x12b7 dscp:0b****** "
             f"int_source(instruction_bitmap:{HPCC_INST:#06x}, ds_instruction:{HPCC_DS:#06x}, "
             "max_hops:8)")]
    sent = []
    for psn in (1, 2):
        frame = roce_frame(psn=psn)
        out = routed(frame, H2_MAC, switch_mac(1))
        tx = sum(len(s) for s in sent)
        hop = int_md.HopRecord(node_id=1, egress_ts=0, tx_bytes=tx, line_rate=25000)
        want = int_md.insert_int(out, [hop], remaining_hop_count=7)
        sent.append(want)
        # hop record after shim + MD: node 4, queue 4, egress ts 8 (wildcard)
        exp = wild(hexs(want), 14 + 20 + 8 + 16 + 8, 8)
        lines += [f"# RoCEv2 PSN {psn}: shim + MD + one 28-byte hop record",
                  f"packet 1 {hexs(frame)}", f"expect 2 {exp} $"]
    plain = roce_frame(dport=5000)
    lines += ["# UDP to port 5000 is not watched: routed only",
              f"packet 1 {hexs(plain)}",
              f"expect 2 {hexs(routed(plain, H2_MAC, switch_mac(1)))} $",
              "check_counter int_events(1) packets == 2",
              "check_counter int_events(2) packets == 2",
              "check_counter SwitchEgress.egress_port_counter(2) packets == 3"]
    return "\n".join(lines) + "\n"


def report_stf() -> str:
    original = roce_frame(psn=5)
    hops = [int_md.HopRecord(node_id=7, egress_ts=100, line_rate=10),
            int_md.HopRecord(node_id=6, egress_ts=50, line_rate=10)]
    with_int = int_md.insert_int(original, hops, remaining_hop_count=6)
    received = with_link_seq(with_int, 0)
    lines = ["# Report-mode sink: INT packet arriving on a fabric port (link sequence 0)",
             *common(3, "report"),
             ("setdefault SwitchEgress.report_config set_report_config("
             "switch_mac:0x02aa00000003, collector_mac:0x020000000909, "
             "switch_ip:0x0a000003, collector_ip:0x0a000909, collector_port:32766, "
             "payload_bytes:12, hw_id:5)"),
             "mirroring_add 500 3",
             f"packet 1 {hexs(received)}",
             "# the packet leaves as the source got it",
             f"expect 2 {hexs(routed(original, H2_MAC, switch_mac(1)))} $"]
    # Report: Eth / IPv4 / UDP / group / individual / main / sink metadata / inner.
    l3 = with_int[14:]
    int_len = 4 + with_int[43] * 4
    inner = l3[:28 + int_len + 12]
    md = struct.pack("!IQIII", 0, 0, 0, len(received), 25000)
    body = struct.pack("!HHHH", 0x1400, 0x4850, HPCC_DS, 0) + md + inner
    ind = struct.pack("!BBBB", 0x14, len(body) // 4, len(md) // 4, 0x20)
    group = struct.pack("!II", (2 << 28) | (5 << 22) | 0, 3)
    udp_payload = group + ind + body
    udp = struct.pack("!HHHH", 32766, 32766, 8 + len(udp_payload), 0)
    total = 20 + len(udp) + len(udp_payload)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 17, 0,
                               bytes([10, 0, 0, 3]), bytes([10, 0, 9, 9])))
    from formats import roce
    ip[10:12] = struct.pack("!H", roce.ipv4_checksum(bytes(ip)))
    eth = bytes.fromhex("020000000909" "02aa00000003" "0800")
    report = eth + bytes(ip) + udp + udp_payload
    exp = wild(hexs(report), 62 + 4, 8)        # sink egress timestamp
    # the port's last hop latency and tx bytes: the report is a clone, and BMv2's egress
    # may run it before or after the original packet that sets them (softswitch: after)
    exp = wild(exp, 62 + 4 + 8, 8)
    lines += ["# and a Telemetry Report v2.0 goes to the collector port (timestamp, the port's",
              "# hop latency and tx bytes wildcarded: BMv2 may run the clone before the original)",
              f"expect 3 {exp} $",
              "check_counter int_events(7) packets == 1",
              "check_counter int_events(9) packets == 1"]
    return "\n".join(lines) + "\n"


def link_seq_stf() -> str:
    lines = ["# Fabric port: every packet sent carries the port's next link sequence number",
             *common(1, "none"),
             "add SwitchEgress.fabric_port egress_port:2 set_fabric()"]
    for seq in range(3):
        frame = roce_frame(psn=seq, dport=5000)
        out = with_link_seq(routed(frame, H2_MAC, switch_mac(1)), seq)
        lines += [f"packet 1 {hexs(frame)}", f"expect 2 {hexs(out)} $"]
    lines += ["# a link sequence header received is popped",
              f"packet 1 {hexs(with_link_seq(roce_frame(psn=9, dport=5000), 0))}",
              f"expect 2 {hexs(with_link_seq(routed(roce_frame(psn=9, dport=5000), H2_MAC, switch_mac(1)), 3))} $"]
    return "\n".join(lines) + "\n"


def entries_file() -> str:
    """Configuration of one switch: INT source for RoCEv2, report-mode sink on port 2."""
    lines = ["# One switch: h1 on port 1, h2 on port 2 (report-mode sink), collector on port 3.",
             ("# python -m softswitch run p4/int_rocev2.p4 --entries "
             "tests/p4_int/single_switch.entries --port 1 --packet HEX"),
             *common(1, "report"),
             ("add SwitchIngress.int_watchlist 10 src_addr:0x******** dst_addr:0x******** "
             "src_port:0x**** dst_port:0x12b7 dscp:0b****** "
             f"int_source(instruction_bitmap:{HPCC_INST:#06x}, ds_instruction:{HPCC_DS:#06x}, "
             "max_hops:8)"),
             ("setdefault SwitchEgress.report_config set_report_config("
             "switch_mac:0x02aa00000001, collector_mac:0x020000000909, "
             "switch_ip:0x0a000001, collector_ip:0x0a000909, collector_port:32766, "
             "payload_bytes:12, hw_id:1)"),
             "mirroring_add 500 3"]
    return "\n".join(lines) + "\n"


def main() -> int:
    (HERE / "int_source.stf").write_text(source_stf())
    (HERE / "int_report.stf").write_text(report_stf())
    (HERE / "link_seq.stf").write_text(link_seq_stf())
    (HERE / "single_switch.entries").write_text(entries_file())
    return 0


if __name__ == "__main__":
    sys.exit(main())
