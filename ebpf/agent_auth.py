"""The host agent's side of ``formats.auth``: sealed batches and confirmations, opened
feedback, and the command-line options that go with them.

With a key file the agent seals every host-record batch (kind HOST_BATCH, sender =
its agent id) and confirmation (CONFIRM), and relays only feedback frames (FEEDBACK)
that the controller (``CONTROLLER_SENDER_ID``) sealed with a valid key and a new
sequence; everything else is counted by reason (``common.auth.channel``) and logged at
most once per reason every ten seconds.  Without a key nothing is sealed and
feedback is taken as it comes, which ``common.auth.exposure`` allows only on loopback,
the test bed's management network or with ``--insecure``.
"""
from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from common.auth import KeyFile, RejectLog, Signer, Verifier
from common.auth.exposure import check_exposure
from formats.agent_batch import MAX_UDP_PAYLOAD, max_records
from formats.auth import AUTH_OVERHEAD, CONTROLLER_SENDER_ID, FrameKind
from formats.int_md import HOST_RECORD_DTYPE

__all__ = ["FINAL_PREFIX", "AgentAuth", "add_auth_arguments", "auth_from_arguments",
           "final_line"]

FINAL_PREFIX = "ebpf.agent: final "

log = logging.getLogger("ebpf.agent")


class AgentAuth:
    """Signers for what the agent sends, a verifier for the feedback it takes."""

    def __init__(self, keys: KeyFile, *, agent_id: int,
                 controller_id: int = CONTROLLER_SENDER_ID) -> None:
        self.keys = keys
        self.batches = Signer(keys, sender_id=agent_id, kind=FrameKind.HOST_BATCH)
        self.confirms = Signer(keys, sender_id=agent_id, kind=FrameKind.CONFIRM,
                               epoch_us=self.batches.epoch)
        self.feedback = Verifier(keys, kinds=(FrameKind.FEEDBACK,),
                                 only_senders=frozenset({controller_id}),
                                 log=RejectLog(log, f"agent {agent_id}: feedback"))

    @staticmethod
    def batch_records(wanted: int | None) -> int:
        """Records per batch that still fit one datagram with the frame around it."""
        limit = max_records(HOST_RECORD_DTYPE.itemsize, MAX_UDP_PAYLOAD - AUTH_OVERHEAD)
        return min(limit, wanted or limit)

    def open_feedback(self, data: bytes, source: object) -> bytes | None:
        opened = self.feedback.open(data, source)
        return None if opened is None else opened.payload

    def rejected(self) -> dict[str, int]:
        return dict(self.feedback.stats.rejected)


def add_auth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key-file", metavar="FILE",
                   help="key file (YAML, mode 0600) to seal records and confirmations and "
                        "check the controller's feedback with (README: Security)")
    p.add_argument("--feedback-bind", default="0.0.0.0", metavar="ADDR",
                   help="address to take feedback on (default 0.0.0.0)")
    p.add_argument("--insecure", action="store_true",
                   help="without --key-file, still listen beyond loopback and the test bed's "
                        "management network (anyone reaching the port can set rates)")


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
