"""The Python target's switch process: open ports, install the program, host the
P4Runtime server (the shared pieces are ``softswitch.switchd``'s).

`Switchd` owns every resource (sockets, threads, capture files, gRPC server) and
releases them in `close`, whatever failed; `run` is the main loop that logs
statistics until told to stop (SIGTERM/SIGINT in the CLI).
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from softswitch.errors import SoftswitchError
from softswitch.switchd.errors import ProgramError
from softswitch.switchd.options import ALL_PORTS, SwitchOptions, check_options
from softswitch.switchd.ports import Port, in_netns
from softswitch.switchd.serve import apply_entries, serve_options, stop_server
from softswitch.switchd.stats import format_stats, write_stats
from softswitch.targets.python.device import SwitchDevice

LOG = logging.getLogger("softswitch.switchd")


def load_pipeline(opts: SwitchOptions) -> Any:
    """Compile the program named on the command line into a `Pipeline` (with its P4Info)."""
    from softswitch.frontend.errors import P4Error
    from softswitch.p4runtime.device import Pipeline
    from softswitch.targets.python.switch import Switch
    path = Path(opts.program or "")
    try:
        sw = Switch.from_file(path, include_dirs=opts.include_dirs, defines=opts.defines,
                              name=opts.name)
        info = sw.program.p4info()
        source = path.read_bytes()
    except P4Error as exc:
        raise ProgramError(exc.render() if hasattr(exc, "render") else str(exc)) from None
    except OSError as exc:
        raise ProgramError(f"{path}: error: cannot read the program: {exc.strerror}") from None
    except SoftswitchError as exc:
        raise ProgramError(f"{path}: error: {exc}") from None
    if opts.entries:
        apply_entries(sw, opts.entries)
    return Pipeline.create(sw, info, device_config=source)


class Switchd:
    """One running switch; `close()` releases everything (safe after a partial start)."""

    def __init__(self, opts: SwitchOptions) -> None:
        check_options(opts)
        self.opts = opts
        self.device: SwitchDevice | None = None
        self.server: Any = None
        self._ports: dict[int, Port] = {}
        self.stop_event = threading.Event()

    def start(self) -> None:
        opts = self.opts
        try:
            if opts.pcap_dir:
                os.makedirs(opts.pcap_dir, exist_ok=True)
            with in_netns(opts.netns):
                for num, ifname in sorted(opts.interfaces.items()):
                    self._ports[num] = Port.open(num, ifname, pcap_dir=opts.pcap_dir)
            default_depth = opts.queue_depths_pkts.get(ALL_PORTS)
            dev = SwitchDevice(self._ports, device_id=opts.device_id, cpu_port=opts.cpu_port,
                               name=opts.name,
                               **({"default_depth_pkts": default_depth} if default_depth else {}))
            self.device = dev
            if ALL_PORTS in opts.queue_rates_bps:
                dev.tm.set_default_rate(opts.queue_rates_bps[ALL_PORTS])
            for port, rate in opts.queue_rates_bps.items():
                if port != ALL_PORTS:
                    dev.tm.set_rate(port, rate)
            for port, depth in opts.queue_depths_pkts.items():
                if port != ALL_PORTS:
                    dev.tm.set_depth(port, depth)
            for port in self._ports:
                dev.tm.queue(port)
            if opts.program:
                dev.set_pipeline(load_pipeline(opts))
            dev.start()
            if opts.grpc_server_addr:
                self.server = serve_options(dev, opts)
        except BaseException:
            self.close()
            raise
        self.write_stats()
        LOG.info("%s: ready: device %d, ports %s, cpu port %d%s", opts.name, opts.device_id,
                 ", ".join(f"{n}@{p.ifname}" for n, p in sorted(self._ports.items())) or "none",
                 opts.cpu_port, "" if opts.program else ", waiting for SetForwardingPipelineConfig")

    def run(self) -> None:
        """Block until `stop_event` is set, logging/writing statistics at the interval."""
        interval = self.opts.stats_interval_s or (1.0 if self.opts.stats_file else 3600.0)
        while not self.stop_event.wait(interval):
            if self.opts.stats_interval_s:
                self.log_stats()
            self.write_stats()

    def snapshot(self) -> dict[str, Any]:
        return self.device.snapshot() if self.device else {}

    def log_stats(self) -> None:
        if self.device is not None:
            for line in format_stats(self.snapshot()).splitlines():
                LOG.info("%s", line)

    def write_stats(self) -> None:
        """The device's statistics as JSON in --stats-file (atomically replaced)."""
        if self.device is not None:
            write_stats(self.opts.stats_file, self.snapshot)

    def close(self) -> None:
        """Stop the server, the threads and the ports; flush captures; final statistics."""
        stop_server(self.server)
        self.server = None
        if self.device is not None:
            self.device.stop()
            self.write_stats()
            self.log_stats()
        else:
            for p in self._ports.values():
                p.close()
        self._ports = {}
