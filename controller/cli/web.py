"""``python -m controller web``: the live view of a finished run's results folder.

examples:
  python -m controller web --out results/demo                 # http://127.0.0.1:8080/
  python -m controller web --out out/ --topology mininet_topos/topofiles/dumbbell.yaml
  python -m controller web --out results/demo --web 0.0.0.0:8080   # prints a URL with a token

A live controller serves the same page itself: ``python -m controller run ... --web
127.0.0.1:8080`` (and ``python -m mininet_topos demo --web 127.0.0.1:8080``).  The page
re-reads the state file whenever it changes, so pointing this at the --out of a running
controller also works.  Stop with Ctrl-C.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("web", help="serve the live view of a results folder",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR",
                   help="results folder of demo/experiment, or a controller's --out")
    p.add_argument("--topology", metavar="FILE", help="topology file (default: DIR/logs/topology.yaml)")
    p.add_argument("--web", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where to serve the page (default 127.0.0.1:8080; port 0: any free port)")
    p.add_argument("--web-token", metavar="TOKEN",
                   help="token the page needs (beyond loopback one is generated when not given)")
    p.set_defaults(func=web)


def web(args: argparse.Namespace) -> int:
    from controller.runner.state import STATE_FILE, StateError, read_state
    from controller.topology import TopologyError, load_topology
    from controller.web import WebError, WebServer, build_view, parse_web_address
    from controller.web.recorded import find_state, find_topology
    from controller.web.server import check_web_exposure
    out = Path(args.out)
    try:
        host, port = parse_web_address(args.web)
        token = check_web_exposure(host, args.web_token)
        state_path = find_state(out, STATE_FILE)
        topo = load_topology(str(find_topology(out, args.topology)))
        read_state(state_path)
    except (WebError, StateError) as exc:
        print(f"controller web: {exc}", file=sys.stderr)
        return 2
    except (TopologyError, OSError) as exc:
        print(f"controller web: topology: {exc}", file=sys.stderr)
        return 2

    def version() -> object:
        try:
            st = os.stat(state_path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def view() -> dict[str, object]:
        state = read_state(state_path)
        return build_view(state, topo, live=bool(state.get("running", False)))

    try:
        srv = WebServer(host=host, port=port, token=token, view=view, version=version).start()
    except WebError as exc:
        print(f"controller web: {exc}", file=sys.stderr)
        return 2
    print(f"live view of {out} at {srv.url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    srv.stop()
    return 0
