"""The rogue host of the ``rogue`` experiment: a process on the test bed's management
network that holds no key and floods forgeries at the controller and the agents.

``python -m mininet_topos.experiment.rogue`` sends, at ``--rate`` messages per second
of each kind for ``--duration`` seconds:

- rate/FEC feedback setting 1 kbit/s on every QP (``--qp AGENT_ADDR:PORT=QPN,...``),
  half as bare records, half in ``formats.auth`` frames under a key of its own;
- host-record batches in the name of the genuine agents (``--agent-id``) to the
  collector, bare and framed likewise, their records marked with source 10.99.99.99;
- Telemetry Reports (HPCC hop records of node ``FORGED_NODE_ID``, a full queue) to
  the collector's report port, from an address that is no switch's.

A forgery the agent took would come back as a confirmation to this process, so
``applied_feedback`` counts the confirmations received.  Every destination must be
loopback or the test bed's management network (``common.auth.exposure``): the flood never
leaves the test bed.  The counts go to ``--out`` as JSON.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np

from common.auth.exposure import is_private_testbed
from controller.int.synth import Hop, build_hpcc_report
from formats.agent_batch import encode_batch
from formats.auth import CONTROLLER_SENDER_ID, FrameKind, encode_frame
from formats.feedback import FEEDBACK_DTYPE
from formats.int_md import HOST_RECORD_DTYPE

__all__ = ["FORGED_NODE_ID", "FORGED_SRC_IP", "main"]

FORGED_NODE_ID = 0xBAD
FORGED_SRC_IP = "10.99.99.99"
_TICK_S = 0.01


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not is_private_testbed(host):
        raise argparse.ArgumentTypeError(f"{text}: not loopback or the test bed's management "
                                         "network; the rogue only floods the test bed")
    return host, int(port)


def _qps(text: str) -> tuple[tuple[str, int], list[int]]:
    addr, _, qps = text.partition("=")
    return _addr(addr), [int(q, 0) for q in qps.split(",") if q]


class Flood:
    """Prepared forgeries of each kind, sent round robin."""

    def __init__(self, qps: list[tuple[tuple[str, int], list[int]]], agent_ids: list[int]) -> None:
        key = os.urandom(32)   # not the deployment's: frames under it are refused
        self.feedback: list[tuple[bytes, tuple[str, int]]] = []
        for addr, qpns in qps:
            rec = np.zeros(len(qpns), FEEDBACK_DTYPE)
            rec["flow_id"], rec["rate_bps"], rec["seq"] = qpns, 1000, 0xF0F0
            raw = rec.tobytes()
            for i in range(64):
                self.feedback.append((raw, addr))
                self.feedback.append((encode_frame(raw, key=key, kind=FrameKind.FEEDBACK,
                                                   key_id=1, sender_id=CONTROLLER_SENDER_ID,
                                                   counter=i, epoch=time.time_ns() // 1000),
                                      addr))
        r = np.zeros(8, HOST_RECORD_DTYPE)
        r["src_ip"] = int(ipaddress.IPv4Address(FORGED_SRC_IP))
        r["dst_ip"], r["orig_dport"], r["dest_qp"], r["hop_count"] = 0x0A000101, 4791, 0x77, 1
        self.batches: list[bytes] = []
        for i, aid in enumerate(agent_ids or [1]):
            raw = encode_batch(r, agent_id=aid, batch_seq=1000 + i)
            self.batches += [raw, encode_frame(raw, key=key, kind=FrameKind.HOST_BATCH, key_id=1,
                                               sender_id=aid, counter=i, epoch=1)]
        hop = Hop(node_id=FORGED_NODE_ID, egress_port=1, queue_bytes=10_000_000,
                  queue_pkts=60_000, tx_bytes=1, line_rate_mbps=1)
        self.reports = [build_hpcc_report(node_id=FORGED_NODE_ID, seq=i, hops=[hop],
                                          sink=hop, dest_qp=0x77) for i in range(64)]


def run(args: argparse.Namespace) -> dict[str, object]:
    flood = Flood(args.qp, args.agent_id)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sent = {"feedback": 0, "host_records": 0, "reports": 0}
    errors = 0
    confirmations = 0
    per_tick = max(1, round(args.rate * _TICK_S))
    end = time.monotonic() + args.duration
    nxt = time.monotonic()
    i = 0
    while time.monotonic() < end:
        for _ in range(per_tick):
            jobs = []
            if args.qp:
                jobs.append(("feedback", *flood.feedback[i % len(flood.feedback)]))
            if args.collector:
                jobs.append(("host_records", flood.batches[i % len(flood.batches)],
                             args.collector))
            if args.reports:
                jobs.append(("reports", flood.reports[i % len(flood.reports)], args.reports))
            for kind, data, addr in jobs:
                try:
                    sock.sendto(data, addr)
                    sent[kind] += 1
                except OSError:
                    errors += 1
            i += 1
        while True:   # a forgery the agent took would be confirmed to us
            try:
                sock.recv(65535)
                confirmations += 1
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                continue
        nxt += _TICK_S
        time.sleep(max(0.0, nxt - time.monotonic()))
    return {"sent": sent, "send_errors": errors, "applied_feedback": confirmations,
            "rate_per_kind": args.rate, "duration_s": args.duration}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mininet_topos.experiment.rogue",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=5000.0, help="messages/s of each kind")
    p.add_argument("--duration", type=float, default=10.0, help="seconds (at most 600)")
    p.add_argument("--qp", type=_qps, action="append", default=[],
                   metavar="ADDR:PORT=QPN,...", help="an agent's feedback port and its QPs")
    p.add_argument("--agent-id", type=lambda t: int(ipaddress.IPv4Address(t)),
                   action="append", default=[], help="agent ids to forge batches of")
    p.add_argument("--collector", type=_addr, help="the controller's agent-batch port")
    p.add_argument("--reports", type=_addr, help="the controller's Telemetry Report port")
    p.add_argument("--out", type=Path, required=True, help="JSON with what was sent")
    args = p.parse_args(argv)
    if not 0 < args.duration <= 600 or not 0 < args.rate <= 50_000:
        p.error("--duration must be in (0, 600] s and --rate in (0, 50000]")
    result = run(args)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
