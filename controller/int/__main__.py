"""Run the telemetry collector on its own, exporting its state.

examples:
  python -m controller.int --out out/                 # files under out/ (no server)
  python -m controller.int --influx http://127.0.0.1:8086 --database int --out out/
  python -m controller.int --listen 0.0.0.0 --report-port 32766 --agent-port 32767 5 12
                                                      # 12 status lines, 5 s apart
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from common import argtypes
from controller.export.credentials import Credentials, load_credentials
from controller.export.errors import ExportError
from controller.export.runner import CollectorExport, InfluxTarget, open_exporter
from controller.int.collector import Collector, CollectorConfig
from controller.int.errors import CollectorError
from formats.agent_batch import AGENT_BATCH_UDP_PORT
from formats.telemetry_report import REPORT_UDP_PORT


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller.int", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--report-port", type=argtypes.port, default=REPORT_UDP_PORT)
    ap.add_argument("--agent-port", type=argtypes.port, default=AGENT_BATCH_UDP_PORT)
    ap.add_argument("--reuse-port", action="store_true",
                    help="share the ports with other collector processes (sharding by sender)")
    ap.add_argument("--influx", metavar="URL", help="InfluxDB (1.x/2.x/3.x) or compatible URL")
    ap.add_argument("--database", default="int_telemetry", help="1.x database / 2.x bucket")
    ap.add_argument("--org", default="int")
    ap.add_argument("--influx-credentials", metavar="FILE",
                    help="token / username / password (YAML, mode 0600); default: $INFLUX_*")
    ap.add_argument("--out", default="out", help="files, spool (default ./out)")
    ap.add_argument("--export-interval", type=argtypes.positive, default=1.0, metavar="S")
    ap.add_argument("interval", nargs="?", type=argtypes.positive, default=1.0, help="status every S s")
    ap.add_argument("count", nargs="?", type=int, default=None, help="status lines, then exit")
    a = ap.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        collector = Collector(CollectorConfig(host=a.listen, report_port=a.report_port,
                                              agent_port=a.agent_port,
                                              reuse_port=a.reuse_port)).start()
    except CollectorError as exc:
        print(f"controller.int: {exc}", file=sys.stderr)
        return 1
    try:
        cred = load_credentials(a.influx_credentials) if a.influx else Credentials()
        exporter = open_exporter(a.influx, out_dir=a.out, target=InfluxTarget(
            database=a.database, org=a.org, token=cred.token, username=cred.username,
            password=cred.password))
    except ExportError as exc:
        collector.stop()
        print(f"controller.int: {exc}", file=sys.stderr)
        return 1
    export = CollectorExport(collector, exporter, interval_s=a.export_interval).start()
    print(f"{'time':<9}{'reports':>9}{'hops':>10}{'bad':>6}{'lost':>6}{'flows':>7}"
          f"{'export':>9}{'spool':>6}")
    shown = 0
    try:
        while not stop.wait(a.interval):
            s = collector.stats()
            print(f"{time.strftime('%H:%M:%S'):<9}{s.reports + s.host_records:>9}"
                  f"{s.report_hop_records + s.host_hop_records:>10}"
                  f"{sum(s.malformed.values()):>6}{s.reports_lost:>6}{s.flows:>7}"
                  f"{exporter.stats.lines_delivered:>9}{len(exporter.spool):>6}", flush=True)
            shown += 1
            if a.count is not None and shown >= a.count:
                break
    finally:
        export.stop()
        collector.stop()
        delivered = exporter.close(timeout_s=5)
        if not delivered:
            print(f"controller.int: export incomplete, {len(exporter.spool)} batches kept in "
                  f"{exporter.spool.dir} for the next run", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
