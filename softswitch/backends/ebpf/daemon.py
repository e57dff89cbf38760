"""The switch process on the eBPF target: the program on each port's tc ingress.

A frame arriving on a port runs the whole pipeline in the kernel and leaves by
``bpf_redirect`` on the interface of its egress port; no frame crosses into Python.
The P4Runtime server drives the same `Table` objects as on the Python target (their
changes are mirrored into the maps). Options the kernel path has no equivalent for yet
(queue rates and depths, captures, packet-out, pipeline replacement) are refused by
name instead of ignored.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from softswitch.backends.ebpf.errors import EbpfKernelError
from softswitch.p4runtime.device import ListenerSet, Pipeline
from softswitch.p4runtime.errors import DeviceError
from softswitch.switchd.errors import OptionError

LOG = logging.getLogger("softswitch.ebpf")
TC_PRIO = 7


class EbpfDevice:
    """The P4Runtime `Device` of a kernel switch: entries yes, packet I/O not yet."""

    def __init__(self, *, device_id: int, cpu_port: int) -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self._pipeline: Pipeline | None = None
        self.listeners = ListenerSet()

    @property
    def pipeline(self) -> Pipeline | None:
        return self._pipeline

    def set_pipeline(self, pipeline: Pipeline, *, reconcile: bool = False) -> None:
        if self._pipeline is not None and pipeline is not self._pipeline:
            raise DeviceError("--target ebpf: replacing the running program over P4Runtime is "
                              "not supported yet; start the switch with the program")
        if getattr(pipeline.switch, "target", "python") != "ebpf":
            raise DeviceError("--target ebpf: SetForwardingPipelineConfig of a new program is "
                              "not supported yet; start the switch with the program")
        self._pipeline = pipeline

    def packet_out(self, payload: bytes, metadata: Mapping[str, int]) -> None:
        raise DeviceError("--target ebpf: PacketOut is not supported yet")

    def add_listener(self, listener: Any) -> None:
        self.listeners.add(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)


def check_ebpf_options(opts: Any) -> None:
    """Refuse what the kernel path cannot do yet, naming the option."""
    if not opts.program:
        raise OptionError("--target ebpf needs the program on the command line")
    if opts.queue_rates_bps:
        raise OptionError("--queue-rate: not supported on --target ebpf yet")
    if opts.queue_depths_pkts:
        raise OptionError("--queue-depth: not supported on --target ebpf yet")
    if opts.pcap_dir:
        raise OptionError("--pcap: not supported on --target ebpf yet (capture on the interfaces)")


class EbpfSwitchd:
    """One kernel switch: load, attach to every port, serve P4Runtime; `close` undoes all."""

    def __init__(self, opts: Any) -> None:
        from softswitch.switchd.options import check_options
        check_options(opts)
        check_ebpf_options(opts)
        self.opts = opts
        self.switch: Any = None
        self.device: EbpfDevice | None = None
        self.server: Any = None
        self.attachments: list[Any] = []
        self.stop_event = threading.Event()

    def start(self) -> None:
        from ebpf.errors import AttachError
        from ebpf.tc import attach_tc
        from softswitch.switchd.daemon import apply_entries, start_grpc
        opts = self.opts
        try:
            self.switch = _load(opts)
            if opts.entries:
                apply_entries(self.switch, opts.entries)
            kernel = self.switch.kernel
            kernel.set_test_port(None)
            for port, ifname in sorted(opts.interfaces.items()):
                try:
                    att = attach_tc(kernel.fd, f"p4_{opts.name}"[:15], ifname, netns=opts.netns,
                                    direction="ingress", prio=TC_PRIO)
                except (AttachError, OSError) as exc:
                    raise EbpfKernelError(f"port {port}@{ifname}: {exc}") from None
                self.attachments.append(att)
                import ctypes
                kernel.table("p4_port_of_ifindex")[ctypes.c_uint32(att.ifindex)] = ctypes.c_uint32(port)
                kernel.table("p4_ifindex_of_port")[ctypes.c_int(port)] = ctypes.c_uint32(att.ifindex)
            if opts.grpc_server_addr:
                from softswitch.p4info import build_p4info
                dev = EbpfDevice(device_id=opts.device_id, cpu_port=opts.cpu_port)
                dev.set_pipeline(Pipeline.create(self.switch, build_p4info(self.switch.program.checked)))
                self.device = dev
                tls = None
                if opts.tls_cert:
                    from softswitch.p4runtime.server import TlsConfig
                    tls = TlsConfig.from_files(opts.tls_cert, opts.tls_key or "", opts.tls_ca)
                self.server = start_grpc(dev, opts.grpc_server_addr, tls)  # type: ignore[arg-type]
        except BaseException:
            self.close()
            raise
        LOG.info("%s: ready (ebpf): ports %s", opts.name,
                 ", ".join(f"{n}@{i}" for n, i in sorted(opts.interfaces.items())) or "none")

    def snapshot(self) -> dict[str, Any]:
        return {"target": "ebpf", **self.switch.kernel.stats()} if self.switch else {}

    def write_stats(self) -> None:
        """The kernel counters as JSON in --stats-file (atomically replaced)."""
        path = self.opts.stats_file
        if not path or self.switch is None:
            return
        import json
        import os
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.snapshot(), f, indent=1)
        os.replace(tmp, path)

    def run(self) -> None:
        interval = self.opts.stats_interval_s or (1.0 if self.opts.stats_file else 3600.0)
        self.write_stats()
        while not self.stop_event.wait(interval):
            if self.opts.stats_interval_s:
                LOG.info("%s: %s", self.opts.name, self.snapshot())
            self.write_stats()

    def close(self) -> None:
        """Stop the server, detach from every port, unload the program and its maps."""
        if self.server is not None:
            try:
                self.server.stop(0.2)
            except Exception as exc:  # noqa: BLE001 - shutting down regardless
                LOG.warning("stopping the P4Runtime server: %s", exc)
            self.server = None
        for att in self.attachments:
            try:
                att.detach()
            except Exception as exc:  # noqa: BLE001 - detach the others regardless
                LOG.warning("detaching from %s: %s", att.ifname, exc)
        self.attachments = []
        if self.switch is not None:
            LOG.info("%s: final statistics %s", self.opts.name, self.snapshot())
            self.switch.close()
            self.switch = None


def _load(opts: Any) -> Any:
    from softswitch.backends.ebpf.switch import EbpfSwitch
    from softswitch.frontend.errors import P4Error
    from softswitch.switchd.errors import ProgramError
    try:
        return EbpfSwitch.from_file(opts.program, include_dirs=opts.include_dirs,
                                    defines=opts.defines, name=opts.name)
    except P4Error as exc:
        raise ProgramError(exc.render()) from None
    except OSError as exc:
        raise ProgramError(f"{opts.program}: error: cannot read the program: {exc.strerror}") from None
    except EbpfKernelError as exc:
        raise ProgramError(f"{opts.program}: error: {exc}") from None
    except Exception as exc:
        from softswitch.errors import SoftswitchError
        if isinstance(exc, SoftswitchError):
            text = str(exc)
            raise ProgramError(text if text.startswith(str(opts.program)) else f"{opts.program}: error: {text}") from None
        raise
