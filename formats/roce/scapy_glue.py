"""scapy glue: dissect project bytes with scapy.contrib.roce (debugging and
cross-checks, never the fast path).
"""
from __future__ import annotations

from formats.roce.headers import RoceFormatError


def to_scapy(data: bytes, *, layer: str = "ether"):
    """Dissect bytes with scapy.contrib.roce layers (``layer``: ether, ip or udp)."""
    from scapy.contrib import roce  # noqa: F401  (binds UDP/4791 -> BTH)
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    cls = {"ether": Ether, "ip": IP, "udp": UDP}.get(layer)
    if cls is None:
        raise RoceFormatError(f"to_scapy: layer {layer!r} is not one of ether, ip, udp")
    return cls(data)
