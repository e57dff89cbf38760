"""Per-run keys of the test bed: one fresh key file for the controller and every agent.

Written in the run's private directory (mode 0700) with mode 0600 before any process
starts, handed to each by path (``--key-file``), never on a command line; it lists
the senders of the run (the controller and each agent host's address) so a frame
from anyone else is refused even with the key, and it is deleted with the directory.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import Path

from controller.topology import Topology
from formats.auth import CONTROLLER_SENDER_ID
from secure.keys import generate_key_file

__all__ = ["run_key_file"]


def run_key_file(private_dir: Path, topo: Topology, agent_hosts: Iterable[str]) -> Path:
    """Path of a new key file for this run's controller and agents."""
    senders = [CONTROLLER_SENDER_ID] + [int(ipaddress.IPv4Address(topo.host(h).ipv4))
                                        for h in agent_hosts]
    path = private_dir / "auth-keys.yaml"
    generate_key_file(path, senders=senders)
    return path
