"""Per-run keys of the test bed: one fresh key file for the controller and every agent,
and (``mtls``) a fresh CA with certificates for P4Runtime over mutual TLS.

Written in the run's private directory (mode 0700) with mode 0600 before any process
starts, handed to each by path (``--key-file``), never on a command line; it lists
the senders of the run (the controller and each agent host's address) so a frame
from anyone else is refused even with the key, and it is deleted with the directory.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import Path

from common.auth.keys import generate_key_file
from common.auth.pki import Issued, make_pki
from controller.topology import SwitchTls, Topology
from formats.auth import CONTROLLER_SENDER_ID

__all__ = ["run_key_file", "with_mutual_tls"]


def run_key_file(private_dir: Path, topo: Topology, agent_hosts: Iterable[str]) -> Path:
    """Path of a new key file for this run's controller and agents."""
    senders = [CONTROLLER_SENDER_ID] + [int(ipaddress.IPv4Address(topo.host(h).ipv4))
                                        for h in agent_hosts]
    path = private_dir / "auth-keys.yaml"
    generate_key_file(path, senders=senders)
    return path


def with_mutual_tls(topo: Topology, private_dir: Path) -> tuple[Topology, Issued]:
    """``topo`` with a ``tls`` entry per switch (a fresh CA and certificates in
    ``private_dir``), and the controller's client certificate."""
    import dataclasses

    pki = make_pki(private_dir / "pki",
                   switches={sw.name: ["localhost", sw.grpc_addr.rpartition(":")[0]]
                             for sw in topo.switches})
    switches = tuple(dataclasses.replace(sw, tls=SwitchTls(
        ca=str(pki.ca.cert), cert=str(pki.switches[sw.name].cert),
        key=str(pki.switches[sw.name].key), server_name=sw.name)) for sw in topo.switches)
    return dataclasses.replace(topo, switches=switches), pki.controller
