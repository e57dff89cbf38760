"""The controller's side of ``formats.auth``, built from ``RunConfig`` and the topology.

With ``--key-file`` the controller seals every feedback datagram (sender
``--sender-id``, default ``CONTROLLER_SENDER_ID``; a standby controller takes another
of ``CONTROLLER_SENDER_IDS``), takes host-agent batches and confirmations only as valid
frames, and takes Telemetry Reports only from the switches' report sources (switch N
sends from ``--report-source-base`` + N, UDP source port ``REPORT_UDP_PORT``).
Without a key nothing changes on the wire, and ``common.auth.exposure`` refuses a
``--listen`` address beyond loopback and the test bed's management network unless
``--insecure`` is given.
"""
from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass

from common.auth import ExposureError, KeyFile, KeyFileError, RejectLog, Signer, Verifier
from common.auth.exposure import check_exposure
from controller.topology import Topology
from formats.auth import FrameKind
from formats.telemetry_report import REPORT_UDP_PORT

from .config import RunConfig
from .errors import RunError

__all__ = ["ControllerAuth", "report_sources"]

LOG = logging.getLogger("controller.auth")


def report_sources(topo: Topology, base: str) -> frozenset[tuple[str, int]]:
    """(address, UDP port) every switch sends its Telemetry Reports from."""
    b = int(ipaddress.IPv4Address(base))
    return frozenset((str(ipaddress.IPv4Address(b + sw.device_id)), REPORT_UDP_PORT)
                     for sw in topo.switches)


@dataclass(slots=True, frozen=True, kw_only=True)
class ControllerAuth:
    keys: KeyFile | None = None
    report_sources: frozenset[tuple[str, int]] | None = None
    feedback_signer: Signer | None = None
    confirm_verifier: Verifier | None = None
    warning: str | None = None

    @classmethod
    def from_config(cls, c: RunConfig, topo: Topology) -> ControllerAuth:
        """Read the key file and check the listen address; RunError names the problem."""
        try:
            keys = KeyFile(c.key_file) if c.key_file else None
            warning = check_exposure("controller collector", c.listen, keyed=keys is not None,
                                     insecure=c.insecure)
        except (KeyFileError, ExposureError) as exc:
            raise RunError(str(exc)) from None
        if warning:
            LOG.warning("%s", warning)
        if keys is None:
            return cls(warning=warning)
        return cls(keys=keys, report_sources=report_sources(topo, c.report_source_base),
                   feedback_signer=Signer(keys, sender_id=c.sender_id,
                                          kind=FrameKind.FEEDBACK),
                   confirm_verifier=Verifier(keys, kinds=(FrameKind.CONFIRM,),
                                             log=RejectLog(LOG, "controller: confirmation")),
                   warning=warning)
