"""``python -m controller certs``: a CA, a certificate per switch and one for the controller.

examples:
  python -m controller certs --topology mininet_topos/topofiles/two_dc.yaml --out certs/
  python -m controller certs --switch s1=127.0.0.1 --switch s2 --out certs/ --days 7

Each switch certificate is valid for the switch's name, ``localhost`` and the host
part of its gRPC address; private keys are written mode 0600.  Give the switch
``--grpc-server-ssl --grpc-server-cert certs/s1.pem --grpc-server-key certs/s1.key
--grpc-server-cacert certs/ca.pem`` (clients must then present a certificate from
this CA) and the controller ``--grpc-ca certs/ca.pem --grpc-cert certs/controller.pem
--grpc-key certs/controller.key``, or a ``tls:`` entry per switch in the topology.
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("certs", help="make a CA and certificates for P4Runtime over mutual TLS",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topology", metavar="FILE", help="one certificate per switch of this file")
    p.add_argument("--switch", action="append", default=[], metavar="NAME[=ADDR,...]",
                   help="a switch and the extra names/addresses it answers to (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR", help="where the PEM files go")
    p.add_argument("--controller-name", default="controller", metavar="CN")
    p.add_argument("--days", type=int, default=30, help="validity (default 30 days)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from common.auth.pki import make_pki
    switches: dict[str, list[str]] = {}
    if args.topology:
        from controller.topology import TopologyError, load_topology
        try:
            topo = load_topology(args.topology)
        except (TopologyError, OSError) as exc:
            print(f"controller certs: topology {args.topology}: {exc}", file=sys.stderr)
            return 2
        for sw in topo.switches:
            switches[sw.name] = ["localhost", sw.grpc_addr.rpartition(":")[0] or "127.0.0.1"]
    for spec in args.switch:
        name, _, extra = spec.partition("=")
        switches[name] = ["localhost", *[e for e in extra.split(",") if e]]
    if not switches or not 1 <= args.days <= 3650:
        print("controller certs: give --topology or --switch, and --days in 1..3650",
              file=sys.stderr)
        return 2
    pki = make_pki(args.out, switches=switches, controller=args.controller_name,
                   days=args.days)
    print(f"CA {pki.ca.cert} (key {pki.ca.key})")
    for name, issued in pki.switches.items():
        print(f"switch {name}: {issued.cert} {issued.key}")
    print(f"controller: {pki.controller.cert} {pki.controller.key}")
    return 0
