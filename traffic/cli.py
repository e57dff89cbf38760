"""``python -m traffic``: RoCEv2 workloads, one process per host (bcc-tools style CLI)."""
from __future__ import annotations

import argparse
import ipaddress
import json
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import argtypes
from common.loss import LossModel, LossSpecError
from traffic import startgate
from traffic.cc import registry as cc_registry
from traffic.cc.dcqcn import DcqcnSettings
from traffic.cc.hpcc import HpccSettings
from traffic.collog.writer import CollectiveLogWriter
from traffic.emulation import parse_loss
from traffic.endpoint import EndpointConfig
from traffic.errors import ConfigError, TrafficError
from traffic.host_faults import HostFaults, parse_window
from traffic.native_endpoint import ENGINES
from traffic.qp_types import RTO_MIN_S, Reliability
from traffic.runner import QpParams, RankRunner
from traffic.standby import Activation, Standby
from traffic.workloads import Pattern, make_plan, parse_size_dist, rate_arg

EXAMPLES = """examples:
  # 100 messages of 64 KiB over 2 QPs, selective repeat (one command per host)
  python -m traffic p2p --hosts 10.0.0.1,10.0.0.2 --rank 1 -s 64K -c 100 -q 2
  python -m traffic p2p --hosts 10.0.0.1,10.0.0.2 --rank 0 -s 64K -c 100 -q 2
  # sizes from a CDF file, FEC 8+2, a progress line every 2 s
  python -m traffic p2p --hosts ... --rank 0 -s cdf:ws.txt -m fec --fec 8,2 2
  # 4-host ring all-reduce of 4 MiB, 3 iterations, 500 Mb/s per QP
  python -m traffic allreduce --hosts A,B,C,D --rank 2 -s 4M -c 3 --rate 500M
  # 7-to-1 incast, go-back-N, 20 ms RTT and 1% loss emulated at the receiver
  python -m traffic incast --hosts ... --rank 0 -m gbn --delay 10ms --loss 0.01
  # every rank on loopback in one command (one process per rank)
  python -m traffic local alltoall -n 4 -s 16K -c 20
  # rate feedback while running: {"qp": N, "rate_bps": X} on the socket
  python -m traffic p2p ... --control /run/traffic-h1.sock
  # 8-to-1 incast with DCQCN in the senders (CNPs from ECN-marking switches)
  python -m traffic incast --hosts ... --rank 3 --rate 2M --cc dcqcn
  # mode auto's candidates for a 256 KiB message on a 20 ms path, 1 % loss in bursts of 10
  python -m traffic plans --path-loss ge:1%/10 --rtt 20ms -s 256K --inflight 2
"""

DCQCN_HELP = """--cc dcqcn at emulation scale (traffic.cc.dcqcn): the paper's time
constants times 1000 (round trips here take ms, not us): alpha and increase timers
55 ms, one CNP taken per 50 ms, byte counter 100 ms of line rate; rates are
fractions of --rate (the line rate), g = 1/256.  Rate feedback caps the rate."""


def _duration(text: str) -> float:
    t = text.strip().lower()
    try:
        if t.endswith("ms"):
            v = float(t[:-2]) / 1e3
        elif t.endswith("us"):
            v = float(t[:-2]) / 1e6
        else:
            v = float(t.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"duration {text!r}: expected e.g. 10ms, 0.5s") from None
    if not 0 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"duration {text!r}: outside 0..3600 s")
    return v


def _ipv4(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 address") from None


def _hosts(text: str) -> list[str]:
    out = []
    for h in text.split(","):
        try:
            out.append(str(ipaddress.IPv4Address(h.strip())))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--hosts: {h!r} is not an IPv4 address") from None
    if len(out) < 2:
        raise argparse.ArgumentTypeError("--hosts: need at least two addresses")
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError("--hosts: addresses must be distinct")
    return out


def _loss_model(text: str) -> LossModel:
    try:
        return LossModel.parse(text)
    except LossSpecError as e:
        raise argparse.ArgumentTypeError(f"--path-loss {text!r}: {e}") from None


def _fec(text: str) -> tuple[int, int]:
    try:
        k, m = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--fec {text!r}: expected K,M e.g. 8,2") from None
    if not (1 <= k <= 128 and 0 <= m <= 16):
        raise argparse.ArgumentTypeError(f"--fec {text!r}: K in 1..128, M in 0..16")
    return k, m


def _common(p: argparse.ArgumentParser, *, with_hosts: bool = True) -> None:
    if with_hosts:
        p.add_argument("--hosts", type=_hosts, required=True,
                       help="comma-separated IPv4 address of every rank, in rank order")
        p.add_argument("--rank", type=argtypes.bounded_int(0, 255),
                       help="this process's rank (index into --hosts; required but with "
                            "--standby)")
        p.add_argument("--standby", metavar="IP", type=_ipv4,
                       help="allreduce: a spare host's standby rank on address IP (not in "
                            "--hosts): waits on --control for a move_rank command, then "
                            "takes that rank over from the command's iteration on "
                            "(traffic.rankmove)")
        p.add_argument("--control", metavar="PATH",
                       help="UNIX datagram socket for rate/FEC feedback (traffic.control)")
        p.add_argument("--start-at", type=float, metavar="UNIX_TIME",
                       help="wall-clock time at which every rank starts sending")
        p.add_argument("--start-file", metavar="PATH",
                       help="once bound, create PATH.ready-<rank> and wait until PATH "
                            "holds the start time (Unix seconds), written by whoever "
                            "started the ranks once every one is bound (`local` and the "
                            "test bed start their ranks so; traffic/startgate.py)")
        p.add_argument("-o", "--out", metavar="FILE",
                       help="write the JSON summary (with per-QP time series) here")
    p.add_argument("--coll-log", metavar="DIR",
                   help="write this rank's collective log to DIR/rank<N>.jsonl "
                        "(traffic/collog/FORMAT.md)")
    p.add_argument("--coll-log-max-bytes", type=argtypes.bounded_int(4096, 1 << 40),
                   default=8 << 20, metavar="N",
                   help="rotate the collective log at N bytes (2 older parts kept)")
    p.add_argument("--fault-slow-rx", metavar="START:DUR:S",
                   help="injected fault: from Unix time START for DUR s, hold every "
                        "received packet S s (a slow receiver host)")
    p.add_argument("--fault-straggle", metavar="START:DUR:S",
                   help="injected fault: from Unix time START for DUR s, post each "
                        "all-reduce step S s late (a straggler rank)")
    p.add_argument("-s", "--size", default="64K",
                   help="message size: 4096, 64K, fixed:1M, uniform:1K:1M, cdf:FILE "
                        "(allreduce: the vector size)")
    p.add_argument("-c", "--count", type=argtypes.bounded_int(1, 10**7), default=10,
                   help="messages per QP (allreduce/kvcache: iterations/messages)")
    p.add_argument("-q", "--qps", type=argtypes.bounded_int(1, 256), default=1, help="QPs per peer pair")
    p.add_argument("-m", "--mode", type=Reliability.parse, default=Reliability.SR,
                   help="loss recovery: gbn, sr (selective repeat), fec (FEC + SR) or auto "
                        "(per message: SR, SR + tail repairs or interleaved FEC, chosen "
                        "from --path-loss / loss feedback, RTT, rate and size)")
    p.add_argument("--path-loss", metavar="MODEL", type=_loss_model,
                   help="mode auto: the path's loss model as the controller's loss map "
                        "reports it (none, P, P%%, ge:P%%/BURST, ge:p,r[,h[,k]]); later "
                        "feedback on --control ({\"qp\": N, \"loss\": MODEL}) replaces it")
    p.add_argument("--fec", type=_fec, default=(8, 1), metavar="K,M",
                   help="FEC block: K data + M repair packets (default 8,1)")
    p.add_argument("--rate", type=rate_arg, default=100e6, help="per-QP rate, e.g. 100M (bit/s)")
    p.add_argument("--cc", type=_cc, default="none",
                   metavar="{" + ",".join(cc_registry.names(("none", "sender"))) + "}",
                   help="rate control in the sender (traffic.cc.registry): none (the rate, "
                        "changed only by feedback), dcqcn (reacts to CNPs) or hpcc-sender "
                        "(HPCC on the INT echoed in every ACK; needs the receiver's sink "
                        "with --echo); --rate is their line rate")
    p.add_argument("--hpcc-eta", type=argtypes.bounded_float(0.0, 1.0, what="eta"),
                   default=HpccSettings().eta, metavar="ETA",
                   help="HPCC target utilisation (default 0.95)")
    p.add_argument("--hpcc-max-stage", type=argtypes.bounded_int(0, 1000),
                   default=HpccSettings().max_stage, help="HPCC additive steps before a "
                   "multiplicative one (default 5)")
    p.add_argument("--hpcc-wai", type=argtypes.bounded_float(0.0, 1.0, low_open=False),
                   default=HpccSettings().w_ai_fraction,
                   metavar="F", help="HPCC additive increase, fraction of --rate "
                   "(default 0.01)")
    p.add_argument("--hpcc-base-rtt", type=_duration, default=None, metavar="T",
                   help="HPCC base RTT (default: the QP's smallest RTT sample, at least "
                        "--hpcc-min-base-rtt)")
    p.add_argument("--hpcc-min-base-rtt", type=_duration,
                   default=HpccSettings().min_base_rtt_s, metavar="T",
                   help="floor of the measured base RTT (default 30ms: emulation scale)")
    p.add_argument("--hpcc-multi-rate", action="store_true",
                   help="HPCC reference rate per hop (ns-3 MultiRate)")
    p.add_argument("--hpcc-no-window", action="store_true",
                   help="HPCC paces only, without its window of bytes in flight")
    p.add_argument("--hpcc-pacing-burst", type=argtypes.bounded_float(1.0, 64.0, low_open=False),
                   default=HpccSettings().pacing_burst_pkts, metavar="PKTS",
                   help="HPCC pacer depth in full packets (default 1: ns-3's per-packet "
                        "pacing)")
    p.add_argument("--dcqcn-timer", type=_duration, default=DcqcnSettings().timer_s,
                   metavar="T", help="DCQCN alpha and rate-increase timers (default 55ms)")
    p.add_argument("--dcqcn-cnp-interval", type=_duration,
                   default=DcqcnSettings().cnp_interval_s, metavar="T",
                   help="DCQCN takes at most one CNP per T (default 50ms)")
    p.add_argument("--dcqcn-bytes", type=_duration, default=DcqcnSettings().byte_counter_s,
                   metavar="T", help="DCQCN byte counter, as time at line rate (default 100ms)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="the QPs' data path: native (the C engine, traffic/native), python "
                        "(the reference endpoint) or auto (native when it is built and runs "
                        "the rank's --cc; default)")
    p.add_argument("--mtu", type=argtypes.bounded_int(64, 9000), default=1024,
                   help="payload bytes per packet")
    p.add_argument("--window", type=argtypes.bounded_int(1, 8000), default=512,
                   help="packets in flight per QP")
    p.add_argument("--dscp", type=argtypes.bounded_int(0, 63), default=0,
                   help="DSCP of data packets (ECN is always ECT(0))")
    p.add_argument("--rto-min", type=_duration, default=RTO_MIN_S,
                   help="lower bound of the retransmission timeout (default 30ms: above "
                        "a busy host's scheduling delays, which are no loss)")
    p.add_argument("--inflight", type=argtypes.bounded_int(1, 10**6), default=4,
                   help="messages posted ahead per QP")
    p.add_argument("--prefill", type=argtypes.bounded_int(1, 255), default=None,
                   help="kvcache: number of prefill ranks, each sending to every decode "
                        "rank (default: half of the ranks)")
    p.add_argument("--delay", type=_duration, default=0.0,
                   help="emulated one-way delay added at this receiver, e.g. 10ms")
    p.add_argument("--loss", default="none",
                   help="emulated loss at this receiver: P, P%%, bernoulli:P, ge:p,r[,h[,k]] or ge:P%%/BURST; "
                        "a ge form with @SLOT (ge:1%%/10@91us) also moves its chain per slot of time")
    p.add_argument("--loss-scope", choices=("data", "all"), default="data",
                   help="packets the emulated loss hits (default: data and FEC repair)")
    p.add_argument("--seed", type=int, default=1, help="seed of sizes, payloads and loss")
    p.add_argument("--timeout", type=_duration, default=60.0, help="give up after this long")
    p.add_argument("interval", nargs="?", type=_duration, default=1.0,
                   help="progress line every INTERVAL seconds (default 1)")
    p.add_argument("count_lines", nargs="?", type=argtypes.bounded_int(1, 10**6), metavar="count",
                   help="stop after COUNT progress lines")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m traffic",
        description="RoCEv2 (UDP 4791) RDMA WRITE workloads with per-QP pacing and\n"
                    "loss recovery; one process per host.",
        epilog=EXAMPLES + "\n" + DCQCN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for pat, text in ((Pattern.P2P, "rank 0 sends to rank 1"),
                      (Pattern.INCAST, "every rank sends to rank 0"),
                      (Pattern.ALLTOALL, "every rank sends to every other rank"),
                      (Pattern.ALLREDUCE, "ring all-reduce among all ranks"),
                      (Pattern.KVCACHE, "prefill ranks send KV-cache bursts to decode ranks")):
        p = sub.add_parser(pat.value, help=text, epilog=EXAMPLES + "\n" + DCQCN_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _common(p)
    pp = sub.add_parser("plans", help="mode auto's candidate plans for one message, with "
                                      "the FCT the policy predicts (no network)",
                        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    pp.add_argument("--path-loss", metavar="MODEL", type=_loss_model, required=True,
                    help="the path's loss model: P, P%%, ge:P%%/BURST (loss P in bursts of "
                         "BURST packets on average), ge:p,r[,h[,k]]")
    pp.add_argument("--rtt", type=_duration, default=0.02, help="round trip (default 20ms)")
    pp.add_argument("--rate", type=rate_arg, default=100e6, help="the QP's rate (default 100M)")
    pp.add_argument("-s", "--size", default="256K", help="message size (default 256K)")
    pp.add_argument("--mtu", type=argtypes.bounded_int(64, 9000), default=1024,
                    help="payload bytes per packet (default 1024)")
    pp.add_argument("--inflight", type=argtypes.bounded_int(1, 4096), default=1,
                    help="messages posted and unacknowledged, this one included (default 1): "
                         "fewer packets than a round trip holds make the QP window-bound")
    pp.add_argument("--rto-min", type=_duration, default=RTO_MIN_S,
                    help="the QP's timer floor (a lost resend costs two timeouts)")
    pp.add_argument("--cap", type=argtypes.bounded_float(0, 1, what="repair cap"),
                    help="repair packets per data packet to consider (default: the "
                         "policy's cap for this path; wider shows plans it would not send)")
    pp.add_argument("--top", type=argtypes.bounded_int(1, 100_000), default=10,
                    help="rows (the cheapest; SR and the choice always shown)")
    lp = sub.add_parser("local", help="run every rank of a workload on loopback addresses",
                        epilog=EXAMPLES + "\n" + DCQCN_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    lp.add_argument("pattern", type=Pattern, choices=list(Pattern),
                    metavar="{" + ",".join(p.value for p in Pattern) + "}")
    lp.add_argument("-n", "--nranks", type=argtypes.bounded_int(2, 64), default=2)
    lp.add_argument("-O", "--out-dir", metavar="DIR", help="write rank<N>.json files here")
    _common(lp, with_hosts=False)
    return ap


def _standby(args: argparse.Namespace) -> Activation | None:
    """``--standby``: wait for a move; the rank it makes this process (or None)."""
    if args.cmd != Pattern.ALLREDUCE.value or not args.control:
        raise ConfigError("--standby: only an allreduce rank can stand by, with --control")
    if args.engine == "native":
        raise ConfigError("--standby: the python engine answers move commands, not native")
    args.engine = "python"
    if args.standby in args.hosts:
        raise ConfigError(f"--standby {args.standby}: already a host of --hosts")
    sb = Standby(args.control, args.standby, len(args.hosts), args.count)
    print(f"standby {args.standby} on {args.control}", flush=True)
    got = sb.wait(args.timeout, stop=STOP.is_set)
    for e in sb.rejects:
        print(f"traffic: {e}", file=sys.stderr)
    if got is None:
        print(json.dumps({"standby": args.standby, "activated": False,
                          "move_rejects": len(sb.rejects)}), flush=True)
    return got


def _run_rank(args: argparse.Namespace) -> int:
    pattern = Pattern(args.cmd)
    first_iter = 0
    activation = None
    if args.standby:
        activation = _standby(args)
        if activation is None:
            return 130 if STOP.is_set() else 0
        args.rank, first_iter = activation.rank, activation.at_iter
        args.hosts[args.rank] = args.standby
        args.start_file = args.start_at = None  # the ring runs already
    elif args.rank is None:
        raise ConfigError("--rank is required (or --standby IP)")
    sizes = parse_size_dist(args.size)
    plan = make_plan(pattern, rank=args.rank, nranks=len(args.hosts), qps=args.qps,
                     count=args.count, sizes=sizes, seed=args.seed, prefill=args.prefill)
    k, m = args.fec
    qp = QpParams(mode=args.mode, mtu=args.mtu, rate_bps=args.rate, window_pkts=args.window,
                  fec_k=k, fec_m=m, rto_min_s=args.rto_min, dscp=args.dscp, cc=args.cc,
                  path_loss=args.path_loss,
                  dcqcn=DcqcnSettings(timer_s=args.dcqcn_timer,
                                      alpha_interval_s=args.dcqcn_timer,
                                      cnp_interval_s=args.dcqcn_cnp_interval,
                                      byte_counter_s=args.dcqcn_bytes),
                  hpcc=_hpcc_settings(args))
    ep_cfg = EndpointConfig(ip=args.hosts[args.rank], delay_s=args.delay,
                            loss=parse_loss(args.loss, seed=args.seed * 7919 + args.rank),
                            loss_scope=args.loss_scope, control_path=args.control,
                            realtime=True)  # the host's NIC (traffic.realtime)
    ar_bytes = sizes.lo if sizes.kind == "fixed" else int(sizes.mean)
    coll_log = (CollectiveLogWriter(args.coll_log, args.rank, max_bytes=args.coll_log_max_bytes)
                if args.coll_log else None)
    faults = None
    if args.fault_slow_rx or args.fault_straggle:
        faults = HostFaults(
            slow_rx=parse_window(args.fault_slow_rx, "--fault-slow-rx")
            if args.fault_slow_rx else None,
            straggle=parse_window(args.fault_straggle, "--fault-straggle")
            if args.fault_straggle else None)
    runner = RankRunner(plan, args.hosts, ep_cfg, qp, seed=args.seed, inflight=args.inflight,
                        allreduce_bytes=ar_bytes, iterations=args.count, coll_log=coll_log,
                        faults=faults, engine=args.engine, first_iter=first_iter)
    if activation is not None:
        runner.confirm_move(activation.reply_to)
    timeout = args.timeout
    if args.count_lines:
        timeout = min(timeout, args.interval * args.count_lines)
    def ready() -> None:
        print(f"ready rank {args.rank} {args.hosts[args.rank]}", flush=True)
        if args.start_file:   # every rank is bound before anyone sends
            startgate.mark_ready(Path(args.start_file), args.rank)
            time.sleep(max(0.0, startgate.wait_start(Path(args.start_file), timeout)
                           - time.time()))

    summary = runner.run(timeout_s=timeout, start_at=args.start_at, progress=sys.stderr,
                         interval_s=args.interval, stop=STOP.is_set, on_ready=ready)
    if args.out:
        Path(args.out).write_text(json.dumps(summary))
    coll = summary["collective"]
    ep = summary["endpoint"]["endpoint"]
    print(json.dumps({
        "rank": args.rank, "finished": summary["finished"],
        "completion_s": round(summary["completion_s"], 6),
        "goodput_tx_bps": round(summary["goodput_tx_bps"]),
        "goodput_rx_bps": round(summary["goodput_rx_bps"]),
        "retx_pkts": sum(r["retx_pkts"] for r in summary["endpoint"]["requesters"].values()),
        "fec_repaired": sum(r["fec_repaired"]
                            for r in summary["endpoint"]["responders"].values()),
        "injected_drops": ep["injected_drops"], "bad_icrc": ep["bad_icrc"],
        "send_errors": ep["send_errors"],
        "engine": summary["engine"],
        "result_ok": coll.get("result_ok"),
        **_cc_fields(summary["cc"]),
    }), flush=True)
    if summary.get("interrupted"):
        print(f"traffic: rank {args.rank} interrupted", file=sys.stderr)
        return 130
    if not summary["finished"]:
        print(f"traffic: rank {args.rank} did not finish within {timeout:g} s", file=sys.stderr)
        return 2
    if coll.get("result_ok") is False:
        print(f"traffic: rank {args.rank}: WRONG DATA: the received data differs from what "
              "the peers sent (ranks given different --seed?)", file=sys.stderr)
        return 3
    return 0


def _hpcc_settings(args: argparse.Namespace) -> HpccSettings:
    try:
        return HpccSettings(eta=args.hpcc_eta, max_stage=args.hpcc_max_stage,
                            w_ai_fraction=args.hpcc_wai, base_rtt_s=args.hpcc_base_rtt,
                            min_base_rtt_s=args.hpcc_min_base_rtt,
                            multi_rate=args.hpcc_multi_rate, window=not args.hpcc_no_window,
                            pacing_burst_pkts=args.hpcc_pacing_burst)
    except ConfigError as e:
        raise SystemExit(f"traffic: {e}") from None


def _cc(text: str) -> str:
    """``--cc``: a sender algorithm of :mod:`traffic.cc.registry` (or none)."""
    try:
        return cc_registry.parse_sender(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _cc_fields(cc: dict) -> dict:
    """The final line's rate-control figures (CNPs, cuts, rates, HPCC's reaction)."""
    if cc["mode"] == "none":
        return {}
    rates = list(cc["final_rate_bps"].values())
    out = {"cc": cc["mode"], "cnps_rx": cc["cnps_rx"], "rate_cuts": cc.get("rate_cuts", 0),
           "final_rate_bps": round(min(rates)) if rates else None}
    if "echo_acks" in cc:
        out["echo_acks"] = cc["echo_acks"]
        out["reaction_s"] = min(cc["reaction_s"]) if cc["reaction_s"] else None
    return out


def aggregate(out_dir: Path, nranks: int) -> dict:
    """Whole-collective figures from the rank summaries (all ranks share one start)."""
    outs = []
    for r in range(nranks):
        try:
            outs.append(json.loads((out_dir / f"rank{r}.json").read_text()))
        except (OSError, json.JSONDecodeError):
            return {"collective": None, "error": f"rank {r} wrote no summary"}
    done = max(o["completion_s"] for o in outs)
    agg: dict = {"collective": outs[0]["workload"], "ranks": nranks,
                 "finished": all(o["finished"] for o in outs), "completion_s": done,
                 "bytes": sum(o["bytes_sent"] for o in outs)}
    agg["algbw_bps"] = agg["bytes"] * 8 / done if done > 0 else None
    if outs[0]["workload"] == "allreduce":
        iters = [max(t) for t in zip(*(o["collective"]["completion_s"] for o in outs))]
        size = outs[0]["collective"]["message_bytes"]
        agg.update(iteration_s=iters, algbw_bps=[size * 8 / t for t in iters])
    verdicts = [o["collective"].get("result_ok") for o in outs]
    agg["result_ok"] = (False if False in verdicts else None if None in verdicts else True)
    return agg


def _run_local(args: argparse.Namespace, argv: list[str]) -> int:
    """Spawn one process per rank on 127.x.y.z addresses (random /24 per run)."""
    net = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"
    hosts = ",".join(f"{net}.{10 + r}" for r in range(args.nranks))
    # rebuild the rank command line from the local one
    rest = list(argv)
    rest.remove("local")
    rest.remove(args.pattern.value)
    drop_next = {"-n", "--nranks", "-O", "--out-dir"}
    clean, skip = [], False
    for a in rest:
        if skip:
            skip = False
            continue
        if a in drop_next:
            skip = True
            continue
        if a.split("=")[0] in drop_next:
            continue
        clean.append(a)
    # the start file and, without -O, the rank summaries live in a folder removed on exit
    with tempfile.TemporaryDirectory(prefix="traffic-local-") as work:
        out_dir = Path(args.out_dir) if args.out_dir else Path(work)
        out_dir.mkdir(parents=True, exist_ok=True)
        start_file = Path(work) / "start"
        procs = []
        try:
            for r in range(args.nranks):
                cmd = [sys.executable, "-m", "traffic", args.pattern.value, "--hosts", hosts,
                       "--rank", str(r), "--start-file", str(start_file),
                       "-o", str(out_dir / f"rank{r}.json"), *clean]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
            # nobody sends before every rank can receive: a rank that bound late (a
            # slow start on a busy host) would otherwise cost retransmissions; a rank
            # that exits early releases the others (its error is its exit status)
            startgate.start_together(start_file, args.nranks, timeout_s=args.timeout + 30,
                                     alive=lambda: all(p.poll() is None for p in procs))
            rc = 0
            for p in procs:
                out, _ = p.communicate(timeout=args.timeout + 30)
                last = out.strip().splitlines()[-1] if out.strip() else "{}"
                print(last)
                rc = rc or p.returncode
            agg = aggregate(out_dir, args.nranks)
            print(json.dumps(agg))
            if args.out_dir:
                print(f"summaries in {out_dir}", file=sys.stderr)
            if rc == 0 and agg.get("result_ok") is False:
                rc = 3
            return rc
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=5)


STOP = threading.Event()


def _sigterm(signum: int, frame: object) -> None:
    """SIGTERM / SIGINT end a run: summary written, sockets closed.

    The first raises KeyboardInterrupt and sets :data:`STOP`, which the runner also
    polls (in case the exception lands where Python swallows it); later ones are
    ignored, so a second signal cannot interrupt the summary being written.
    """
    if STOP.is_set():
        return
    STOP.set()
    raise KeyboardInterrupt


def _plans(args: argparse.Namespace) -> int:
    """``plans``: every candidate the policy weighs for one message (traffic.plan_table)."""
    from traffic import recovery
    from traffic.plan_table import format_predictions
    from traffic.requester import full_pkt_wire_bytes
    from traffic.workloads import parse_size

    n = -(-parse_size(args.size) // args.mtu)
    wire = full_pkt_wire_bytes(args.mtu)
    view = recovery.make_view(args.path_loss, "--path-loss", rtt_s=args.rtt,
                              rate_bps=args.rate, wire_pkt_bytes=wire,
                              rto_min_s=args.rto_min, posted_pkts=n * args.inflight)
    cfg = recovery.PolicyConfig()
    cap = args.cap if args.cap is not None else recovery.repair_cap(
        view.quantised().loss, cfg, view.window_bound)
    preds = recovery.predictions(view, n, cfg, cap=cap)
    print(format_predictions(preds, view, n, mtu=args.mtu, cap=cap, top=args.top))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    # the caller's handlers come back on return: a process that runs main in-process (a
    # test) and forks later would otherwise give its copies this handler, which turns
    # the SIGTERM that ends a copy into a KeyboardInterrupt the copy unwinds with
    before = {sig: signal.signal(sig, _sigterm) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if args.cmd == "plans":
            return _plans(args)
        if args.cmd == "local":
            return _run_local(args, argv)
        return _run_rank(args)
    except TrafficError as e:
        print(f"traffic: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
