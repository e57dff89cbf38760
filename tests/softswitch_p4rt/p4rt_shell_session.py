"""A p4runtime-shell session against a running softswitch P4Runtime server.

Run as a separate process by test_p4rt_shell_interop.py (p4runtime-shell keeps a global
client). Prints one JSON object per line; waits for a line on stdin before sniffing
packet-ins so the test can inject the packet at the right moment.

    python p4rt_shell_session.py ADDRESS P4INFO_TXT PROGRAM_P4
"""
from __future__ import annotations

import json
import sys

import p4runtime_sh.shell as sh


def say(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def entries() -> list[list[object]]:
    """(dstAddr, action, port) of each forward entry, as the shell reads them back."""
    out: list[list[object]] = []
    for e in sh.TableEntry("MyIngress.forward").read():
        mac = int.from_bytes(e.match["hdr.ethernet.dstAddr"].exact.value, "big")
        port = (int.from_bytes(e.action["port"].value, "big")
                if e.action.action_name.endswith("set_port") else None)
        out.append([mac, e.action.action_name, port])
    return out


def main() -> None:
    address, p4info_path, program_path = sys.argv[1:4]
    sh.setup(device_id=1, grpc_addr=address, election_id=(0, 1),
             config=sh.FwdPipeConfig(p4info_path, program_path), verbose=False)
    try:
        te = sh.TableEntry("MyIngress.forward")(action="MyIngress.set_port")
        te.match["hdr.ethernet.dstAddr"] = "00:00:00:00:00:aa"
        te.action["port"] = "2"
        te.insert()
        say(step="insert", entries=entries())
        te.action["port"] = "3"
        te.modify()
        say(step="modify", entries=entries())
        te.delete()
        say(step="delete", entries=entries())
        acl = sh.TableEntry("MyIngress.acl")(action="MyIngress.drop", priority=7)
        acl.match["hdr.ethernet.etherType"] = "0x0800&&&0xffff"
        acl.match["hdr.ipv4.protocol"] = "6..17"
        acl.insert()
        rt = sh.TableEntry("MyIngress.routes")(action="MyIngress.route")
        rt.match["hdr.ipv4.dstAddr"] = "10.1.0.0/16"
        rt.action["port"] = "4"
        rt.insert()
        say(step="other tables", acl=len(list(sh.TableEntry("MyIngress.acl").read())),
            routes=len(list(sh.TableEntry("MyIngress.routes").read())))
        mcg = sh.MulticastGroupEntry(5).add(1, 1).add(2, 1)
        mcg.insert()
        groups = [[(r.egress_port, r.instance) for r in g.replicas] for g in sh.MulticastGroupEntry(0).read()]
        member = sh.ActionProfileMember("MyIngress.ecmp_implementation")(action="MyIngress.set_port",
                                                                          member_id=1)
        member.action["port"] = "8"
        member.insert()
        group = sh.ActionProfileGroup("MyIngress.ecmp_implementation")(group_id=3).add(1)
        group.insert()
        ecmp = sh.TableEntry("MyIngress.ecmp")(group_id=3)
        ecmp.match["hdr.ipv4.dstAddr"] = "10.1.2.3"
        ecmp.insert()
        counters = list(sh.CounterEntry("MyIngress.port_counter").read())
        say(step="more entities", groups=groups, counters=len(counters),
            ecmp=[e.group_id for e in sh.TableEntry("MyIngress.ecmp").read()],
            members=[m.member_id for m in sh.ActionProfileMember("MyIngress.ecmp_implementation").read()])
        cpu = sh.TableEntry("MyIngress.forward")(action="MyIngress.to_cpu")
        cpu.match["hdr.ethernet.dstAddr"] = "00:00:00:00:00:bb"
        cpu.insert()
        sniffer = sh.PacketIn()
        say(step="ready")
        sys.stdin.readline()
        got = list(sniffer.sniff(timeout=2))
        packets = []
        for p in got:
            meta = {m.metadata_id: m.value.hex() for m in p.packet.metadata}
            packets.append({"payload": p.packet.payload.hex(), "metadata": meta})
        say(step="packet_in", packets=packets)
        sh.PacketOut(payload=bytes.fromhex("0000000000cc0000000000010800"), egress_port="6").send()
        say(step="packet_out")
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
