"""The host agent's side of ``formats.auth``: sealed batches and confirmations, opened
feedback, and the command-line options that go with them.

With a key file the agent seals every host-record batch (kind HOST_BATCH, sender =
its agent id) and confirmation (CONFIRM), and relays only feedback frames (FEEDBACK)
that a controller (a sender id in ``CONTROLLER_SENDER_IDS``) sealed with a valid key
and a new sequence, sent from an admitted address; everything else is counted by
reason (``common.auth.channel``) and logged at most once per reason every ten seconds.
Without a key nothing is sealed and feedback is taken as it comes, which
``common.auth.exposure`` allows only on loopback, the test bed's management network or
with ``--insecure``.

Admitted feedback sources: the ``--controller`` host (where batches go) and every
``--feedback-from`` address (a standby controller, which signs with its own sender id
and takes over on failover).  With a key the feedback socket gets a kernel socket
filter (``common.auth.socket_filter``): only datagrams shaped like FEEDBACK frames from
those addresses reach Python (a flood of forgeries then costs no Python time); where
the filter cannot attach the same address check runs in Python.  Both count under
``unknown_source`` in ``auth_rejected``, with the verifier's reasons.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import socket
from collections.abc import Collection, Iterable
from typing import Any

from common.auth import KeyFile, RejectLog, Signer, Verifier
from common.auth.exposure import check_exposure
from common.auth.socket_filter import SourceFilter
from formats.agent_batch import MAX_UDP_PAYLOAD, max_records
from formats.auth import AUTH_OVERHEAD, CONTROLLER_SENDER_IDS, FrameKind
from formats.int_md import HOST_RECORD_DTYPE

__all__ = ["FINAL_PREFIX", "AgentAuth", "add_auth_arguments", "auth_from_arguments",
           "final_line"]

FINAL_PREFIX = "ebpf.agent: final "

log = logging.getLogger("ebpf.agent")


class AgentAuth:
    """Signers for what the agent sends, a verifier for the feedback it takes."""

    def __init__(self, keys: KeyFile, *, agent_id: int,
                 controller_ids: Iterable[int] = CONTROLLER_SENDER_IDS) -> None:
        self.keys = keys
        self.batches = Signer(keys, sender_id=agent_id, kind=FrameKind.HOST_BATCH)
        self.confirms = Signer(keys, sender_id=agent_id, kind=FrameKind.CONFIRM,
                               epoch_us=self.batches.epoch)
        self.feedback = Verifier(keys, kinds=(FrameKind.FEEDBACK,),
                                 only_senders=frozenset(controller_ids),
                                 log=RejectLog(log, f"agent {agent_id}: feedback"))
        self.agent_id = agent_id
        self.sources: frozenset[str] | None = None
        """Addresses feedback may come from (None: any)."""
        self.kernel_filter: SourceFilter | None = None
        self._kernel_closed: dict[str, int] = {}   # drops read when the filter went

    def filter_feedback(self, sock: socket.socket, hosts: Collection[str]) -> None:
        """Take feedback only from ``hosts`` (empty: from anywhere) and only FEEDBACK
        frames: in the kernel where the filter attaches, else in ``open_feedback``."""
        self.sources = frozenset(hosts) or None
        self.kernel_filter = SourceFilter.try_attach(
            [sock], sources=None if self.sources is None else {(h, 0) for h in self.sources},
            frame_kind=FrameKind.FEEDBACK, source_reason="unknown_source",
            what=f"agent {self.agent_id}: feedback")

    def close(self) -> None:
        if self.kernel_filter is not None:
            self._kernel_closed = self.kernel_filter.drops()
            self.kernel_filter.close()
            self.kernel_filter = None

    @staticmethod
    def batch_records(wanted: int | None) -> int:
        """Records per batch that still fit one datagram with the frame around it."""
        limit = max_records(HOST_RECORD_DTYPE.itemsize, MAX_UDP_PAYLOAD - AUTH_OVERHEAD)
        return min(limit, wanted or limit)

    def open_feedback(self, data: bytes, source: tuple[str, int]) -> bytes | None:
        """The inner feedback datagram, or None (counted by reason)."""
        if (self.kernel_filter is None and self.sources is not None
                and source[0] not in self.sources):
            self.feedback.reject("unknown_source", f"feedback from {source[0]}:{source[1]}")
            return None
        opened = self.feedback.open(data, source)
        return None if opened is None else opened.payload

    def rejected(self) -> dict[str, int]:
        """Feedback refused by reason, in the kernel's filter or by the verifier."""
        out = dict(self.feedback.stats.rejected)
        kernel = (self.kernel_filter.drops() if self.kernel_filter is not None
                  else self._kernel_closed)
        for k, n in kernel.items():
            out[k] = out.get(k, 0) + n
        return out


def add_auth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key-file", metavar="FILE",
                   help="key file (YAML, mode 0600) to seal records and confirmations and "
                        "check the controller's feedback with (README: Security)")
    p.add_argument("--feedback-bind", default="0.0.0.0", metavar="ADDR",
                   help="address to take feedback on (default 0.0.0.0)")
    p.add_argument("--feedback-from", action="append", default=[], metavar="IPV4",
                   type=_ipv4,
                   help="another controller that may send feedback, e.g. a standby "
                        "(repeatable; the --controller host always may)")
    p.add_argument("--insecure", action="store_true",
                   help="without --key-file, still listen beyond loopback and the test bed's "
                        "management network (anyone reaching the port can set rates)")


def _ipv4(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not an IPv4 address") from None


def auth_from_arguments(args: argparse.Namespace) -> tuple[KeyFile | None, str | None]:
    """(key file or None, warning to print); raises ``KeyFileError`` / ``ExposureError``."""
    keys = KeyFile(args.key_file) if args.key_file else None
    warning = None
    if args.feedback_port:
        warning = check_exposure("ebpf.agent feedback", args.feedback_bind,
                                 keyed=keys is not None, insecure=args.insecure)
    return keys, warning


def final_line(stats: Any) -> str:
    """The agent's last line (stderr): its feedback counters as JSON, for the test bed."""
    return FINAL_PREFIX + json.dumps({
        "feedback_datagrams": stats.feedback_datagrams,
        "feedback_forwarded": stats.feedback_forwarded,
        "feedback_rejected": stats.feedback_rejected,
        "auth_rejected": stats.auth_rejected, "confirmations": stats.confirmations})
