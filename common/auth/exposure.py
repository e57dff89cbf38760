"""Whether a process without a key may listen on an address.

Without authentication anyone who reaches the socket can steer rates, FEC and the
telemetry, so a keyless controller or agent only binds loopback or the test bed's
private management network (``TESTBED_MGMT_NET``: the /30 veths between hosts and
the root namespace) unless the operator says ``--insecure``.
"""
from __future__ import annotations

import ipaddress

__all__ = ["TESTBED_MGMT_NET", "ExposureError", "check_exposure", "is_private_testbed"]

TESTBED_MGMT_NET = ipaddress.ip_network("10.254.0.0/16")


class ExposureError(ValueError):
    """A keyless process was asked to listen beyond loopback / the test bed's network."""


def is_private_testbed(host: str) -> bool:
    """True for loopback and the test bed's management network."""
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    return addr.is_loopback or (addr.version == 4 and addr in TESTBED_MGMT_NET)


def check_exposure(what: str, host: str, *, keyed: bool, insecure: bool) -> str | None:
    """Raise ``ExposureError`` when a keyless ``what`` would listen on ``host``; returns
    a warning to print when ``--insecure`` allows it, None when all is well."""
    if keyed or is_private_testbed(host):
        return None
    text = (f"{what}: listening on {host} without a key lets anyone who reaches it "
            f"forge {'telemetry and ' if 'controller' in what else ''}rate/FEC feedback")
    if not insecure:
        raise ExposureError(f"{text}; give --key-file FILE, bind loopback or "
                            f"{TESTBED_MGMT_NET}, or pass --insecure")
    return f"{text} (--insecure)"
