"""The switch process on the eBPF target: the program on each port's tc ingress, or
on each port's XDP hook with ``--hook xdp`` (`xdp_attach`).

A frame arriving on a port runs the whole pipeline in the kernel and leaves by
``bpf_redirect`` on the interface of its egress port; no frame crosses into Python.
The P4Runtime server drives the same `Table` objects as on the Python target (their
changes are mirrored into the maps). The CPU port is a veth pair (`cpu_port`): frames
the program sends there become PacketIns, PacketOuts enter the program through it.
Options the kernel path has no equivalent for yet (captures) are refused by name
instead of ignored. Queue rates and depths
are the program's virtual queues (`queues`), and the kernel shapes each paced port's
egress at its rate (HTB, removed on close).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from softswitch.backends.ebpf.errors import EbpfKernelError
from softswitch.p4runtime.device import ListenerSet, Pipeline, build_packet_out, split_packet_in
from softswitch.p4runtime.errors import DeviceError
from softswitch.switchd.errors import OptionError, PortError
from softswitch.targets.ebpf.cpu_port import CpuLink

LOG = logging.getLogger("softswitch.ebpf")
TC_PRIO = 7


class UnloadedProgram:
    """A pipeline's program before `EbpfDevice.set_pipeline` loads it: its run-time
    objects (``program``, as a switch has them, for the P4Runtime server's checks)."""

    target = "unloaded"

    def __init__(self, program: Any) -> None:
        self.program = program

    def close(self) -> None:
        """Nothing is loaded."""


class EbpfDevice:
    """The P4Runtime `Device` of a kernel switch: pipelines, entries, packet-in/out.

    A pipeline the server built (`build_switch`: the program's run-time objects, not yet
    in the kernel) is loaded into the kernel here, its maps mirroring those objects, and
    handed to `install`, which moves the ports over to it; the pipeline's switch becomes
    the kernel switch, so everything the server does next goes to the kernel's maps."""

    def __init__(self, *, device_id: int, cpu_port: int, install: Any = None, name: str = "softswitch",
                 cpu_link: CpuLink | None = None, hook: str = "tc") -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.name = name
        self.hook = hook
        self.install = install
        self.cpu_link = cpu_link       # the CPU port's veth pair (the switch process's)
        self.lock = threading.RLock()
        self._pipeline: Pipeline | None = None
        self.listeners = ListenerSet()

    @property
    def pipeline(self) -> Pipeline | None:
        return self._pipeline

    def build_switch(self, path: Path, *, name: str) -> Any:
        """The program's run-time objects (`softswitch.objects`), not loaded yet:
        `set_pipeline` loads them into the kernel (VERIFY alone loads nothing)."""
        from softswitch.frontend.load import load_program
        from softswitch.objects import program_objects
        return UnloadedProgram(program_objects(load_program(path)))

    def set_pipeline(self, pipeline: Pipeline, *, reconcile: bool = False) -> None:
        from softswitch.errors import SoftswitchError
        from softswitch.p4runtime.reconcile import carry_state
        from softswitch.targets.ebpf.switch import EbpfSwitch
        with self.lock:
            sw: Any = pipeline.switch
            if getattr(sw, "target", "python") != "ebpf":
                try:
                    sw = EbpfSwitch(sw.program, name=self.name, hook=self.hook)
                except SoftswitchError as exc:
                    raise DeviceError(f"--target ebpf: {exc}") from None
            try:
                if reconcile and self._pipeline is not None:
                    carry_state(self._pipeline.switch, sw)
                if self.install is not None:
                    self.install(sw)
            except BaseException:
                if sw is not pipeline.switch:
                    sw.close()
                raise
            pipeline.switch = sw
            self._pipeline = pipeline

    def packet_out(self, payload: bytes, metadata: Mapping[str, int]) -> None:
        """The frame (packet_out header + payload) into the program on the CPU port."""
        with self.lock:
            pipe = self._pipeline
            if pipe is None:
                raise DeviceError(f"{self.name}: no pipeline installed; packet-out refused")
            if self.cpu_link is None:
                raise DeviceError(f"{self.name}: --target ebpf: PacketOut needs the switch "
                                  "process's CPU port")
            frame = build_packet_out(pipe, payload, metadata)
        if len(frame) < 14:
            raise DeviceError(f"{self.name}: packet-out of {len(frame)} bytes: shorter than an "
                              "Ethernet header, which --target ebpf cannot take")
        if not self.cpu_link.send(frame):
            raise DeviceError(f"{self.name}: packet-out of {len(frame)} bytes: the kernel refused it")

    def on_cpu_frame(self, frame: bytes) -> None:
        """A frame the program sent to the CPU port: a PacketIn for the server's clients
        (shorter than the packet_in header: dropped, as on the Python target)."""
        pipe = self._pipeline
        if pipe is None:
            return
        try:
            pkt = split_packet_in(pipe, frame)
        except DeviceError:
            return
        self.listeners.packet_in(pkt)

    def add_listener(self, listener: Any) -> None:
        self.listeners.add(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)


def check_ebpf_options(opts: Any) -> None:
    """Refuse what the kernel path cannot do yet, naming the option."""
    if not opts.program and not opts.grpc_server_addr:
        raise OptionError("--target ebpf without a program needs --grpc-server-addr "
                          "(the controller sends the program)")
    if opts.pcap_dir:
        raise OptionError("--pcap: not supported on --target ebpf yet (capture on the interfaces)")
    if opts.hook not in ("tc", "xdp"):
        raise OptionError(f"--hook {opts.hook!r}: expected tc or xdp")
    if opts.hook == "xdp":
        from softswitch.switchd.options import ALL_PORTS
        from softswitch.targets.ebpf.xdp_attach import XDP_MODES
        if opts.xdp_mode not in XDP_MODES:
            raise OptionError(f"--xdp-mode {opts.xdp_mode!r}: expected one of {', '.join(XDP_MODES)}")
        paced = sorted((p, r) for p, r in opts.queue_rates_bps.items() if r)
        if paced:
            port, rate = paced[0]
            where = "" if port == ALL_PORTS else f"{port}:"
            raise OptionError(f"--queue-rate {where}{rate / 1e6:g} with --hook xdp: XDP_REDIRECT "
                              "bypasses the egress qdisc, so the kernel cannot shape the port at "
                              "the traffic manager's rate (use --hook tc)")
    elif opts.xdp_mode != "auto":
        raise OptionError("--xdp-mode needs --hook xdp")


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
        self.shaped: list[str] = []        # interfaces whose root qdisc we replaced
        self.cpu: CpuLink | None = None    # the CPU port (with a P4Runtime server)
        self.xdp: Any = None               # XdpPorts with --hook xdp
        self.stop_event = threading.Event()

    def attach(self, switch: Any) -> None:
        """Move every port to `switch`'s program (the previous one is detached and unloaded
        after the new one is on: frames in between meet one program or the other)."""
        import ctypes

        from common.kernel.errors import AttachError
        from common.kernel.tc import attach_tc
        opts = self.opts
        kernel = switch.kernel
        kernel.set_test_port(None)
        if opts.hook == "xdp":
            self._attach_xdp(switch)
            return
        old, old_switch = self.attachments, self.switch
        self.attachments = []
        prio = TC_PRIO if not old or old[0].prio != TC_PRIO else TC_PRIO + 1
        ports = sorted(opts.interfaces.items())
        if self.cpu is not None:
            ports.append((opts.cpu_port, self.cpu.inner))
        for port, ifname in ports:
            try:
                att = attach_tc(kernel.fd, f"p4_{opts.name}"[:15], ifname, netns=opts.netns,
                                direction="ingress", prio=prio)
            except (AttachError, OSError) as exc:
                raise EbpfKernelError(f"port {port}@{ifname}: {exc}") from None
            prev = next((a for a in old if a.ifname == ifname), None)
            if prev is not None and prev.created_qdisc:   # the clsact qdisc stays with us
                att.created_qdisc, prev.created_qdisc = True, False
            self.attachments.append(att)
            kernel.table("p4_port_of_ifindex")[ctypes.c_uint32(att.ifindex)] = ctypes.c_uint32(port)
            kernel.table("p4_ifindex_of_port")[ctypes.c_int(port)] = ctypes.c_uint32(att.ifindex)
            if port in opts.interfaces:       # the CPU port is unpaced
                rate, depth = self.queue_config(port)
                switch.set_queue(port, rate_bps=rate, depth_pkts=depth)
        for att in old:
            att.detach()
        self.switch = switch
        if old_switch is not None and old_switch is not switch:
            old_switch.close()

    def _attach_xdp(self, switch: Any) -> None:
        """Every port runs `switch`'s XDP program (a BPF link per port; a new program
        replaces the previous one atomically, which is then unloaded)."""
        import ctypes

        from softswitch.targets.ebpf.xdp_attach import XdpPorts
        opts = self.opts
        kernel = switch.kernel
        if self.xdp is None:
            self.xdp = XdpPorts(opts.netns)
        ports = sorted(opts.interfaces.items())
        # the port maps first: the program passes frames of unknown interfaces to the stack
        index = self.xdp.ifindexes([i for _, i in ports])
        for port, ifname in ports:
            kernel.table("p4_port_of_ifindex")[ctypes.c_uint32(index[ifname])] = ctypes.c_uint32(port)
            kernel.table("p4_ifindex_of_port")[ctypes.c_int(port)] = ctypes.c_uint32(index[ifname])
            rate, depth = self.queue_config(port)
            switch.set_queue(port, rate_bps=rate, depth_pkts=depth)
        self.xdp.attach(kernel.fd, [i for _, i in ports], opts.xdp_mode)
        LOG.info("%s: XDP (%s mode) on %s", opts.name, self.xdp.mode, ", ".join(i for _, i in ports))
        old_switch, self.switch = self.switch, switch
        if old_switch is not None and old_switch is not switch:
            old_switch.close()

    def queue_config(self, port: int) -> tuple[float, int]:
        """(rate bit/s, depth packets) of `port`'s queue: its own option, else every port's."""
        from softswitch.backends.ebpf.queues import DEFAULT_DEPTH_PKTS
        from softswitch.switchd.options import ALL_PORTS
        rates, depths = self.opts.queue_rates_bps, self.opts.queue_depths_pkts
        return (float(rates.get(port, rates.get(ALL_PORTS, 0.0))),
                int(depths.get(port, depths.get(ALL_PORTS, DEFAULT_DEPTH_PKTS))))

    def shape(self) -> None:
        """Make the kernel send each paced port's frames at its queue's rate (HTB + FIFO
        on the interface), so the virtual queue's departure times are the real ones."""
        import subprocess

        from softswitch.targets.ebpf.shaping import shaping_argv
        for port, ifname in sorted(self.opts.interfaces.items()):
            rate, depth = self.queue_config(port)
            if not rate:
                continue
            for argv in shaping_argv(ifname, rate, depth, self.opts.netns):
                res = subprocess.run(argv, capture_output=True, text=True, check=False)
                if res.returncode != 0:
                    raise EbpfKernelError(f"port {port}@{ifname}: shaping at {rate:g} bit/s: "
                                          f"{' '.join(argv)}: {res.stderr.strip()}")
            self.shaped.append(ifname)

    def set_queue(self, port: int, *, rate_bps: float | None = None,
                  depth_pkts: int | None = None) -> None:
        """Change a port's queue while running: the program's virtual queue and the
        kernel's shaping follow."""
        import subprocess

        from softswitch.backends.ebpf.hooks import hook_named, refuse_rate
        from softswitch.switchd.options import ALL_PORTS
        from softswitch.targets.ebpf.shaping import shaping_argv, unshaping_argv
        refuse_rate(hook_named(self.opts.hook), port, rate_bps)     # before anything changes
        if rate_bps is not None:
            self.opts.queue_rates_bps[port] = float(rate_bps)
        if depth_pkts is not None:
            self.opts.queue_depths_pkts[port] = int(depth_pkts)
        if self.switch is not None:
            self.switch.set_queue(port, rate_bps=rate_bps, depth_pkts=depth_pkts)
        ifname = self.opts.interfaces.get(port)
        if ifname is None or port == ALL_PORTS:
            return
        rate, depth = self.queue_config(port)
        if rate:
            argvs = shaping_argv(ifname, rate, depth, self.opts.netns)
            if ifname not in self.shaped:
                self.shaped.append(ifname)
        else:
            argvs = [unshaping_argv(ifname, self.opts.netns)] if ifname in self.shaped else []
            if ifname in self.shaped:
                self.shaped.remove(ifname)
        for argv in argvs:
            subprocess.run(argv, capture_output=True, check=False)

    def start(self) -> None:
        from softswitch.switchd.serve import apply_entries, serve_options
        opts = self.opts
        try:
            self.shape()
            if opts.grpc_server_addr:
                self.cpu = CpuLink(opts.cpu_port, netns=opts.netns)
                try:
                    self.cpu.create()
                except (OSError, PortError) as exc:   # the switch still serves; PacketOut is refused
                    LOG.warning("%s: no CPU port (packet-in/out): %s", opts.name, exc)
                    self.cpu = None
            if opts.program:
                sw = _load(opts)
                try:
                    if opts.entries:
                        apply_entries(sw, opts.entries)
                    self.attach(sw)
                except BaseException:
                    if self.switch is not sw:
                        sw.close()
                    raise
            if opts.grpc_server_addr:
                dev = EbpfDevice(device_id=opts.device_id, cpu_port=opts.cpu_port,
                                 install=self.attach, name=opts.name, cpu_link=self.cpu,
                                 hook=opts.hook)
                if self.switch is not None:
                    dev.set_pipeline(Pipeline.create(self.switch, self.switch.program.p4info()))
                self.device = dev
                if self.cpu is not None:
                    self.cpu.start(dev.on_cpu_frame)
                self.server = serve_options(dev, opts)  # type: ignore[arg-type]
        except BaseException:
            self.close()
            raise
        LOG.info("%s: ready (ebpf): ports %s", opts.name,
                 ", ".join(f"{n}@{i}" for n, i in sorted(opts.interfaces.items())) or "none")

    def snapshot(self) -> dict[str, Any]:
        if not self.switch:
            return {}
        queues = self.switch.queue_stats(sorted(self.opts.interfaces))
        cpu = {"packet_ins": self.cpu.packet_ins, "packet_outs": self.cpu.packet_outs} if self.cpu else {}
        return {"target": "ebpf", **self.switch.kernel.stats(), **cpu,
                "queues": {str(p): q for p, q in queues.items()}}

    def write_stats(self) -> None:
        """The kernel counters as JSON in --stats-file (atomically replaced)."""
        if self.switch is not None:
            from softswitch.switchd.stats import write_stats
            write_stats(self.opts.stats_file, self.snapshot)

    def run(self) -> None:
        """Until stopped: hand the program's digests to the P4Runtime server (the kernel
        writes them into ring buffers) and write statistics at their interval."""
        import time

        from softswitch.p4runtime.device import drain_digests
        interval = self.opts.stats_interval_s or (1.0 if self.opts.stats_file else 3600.0)
        self.write_stats()
        due = time.monotonic() + interval
        while not self.stop_event.is_set():
            dev = self.device
            sw = self.switch
            if sw is not None and sw.generated.digests and dev is not None:
                with dev.lock:          # a pipeline push may replace the switch meanwhile
                    sw = self.switch
                    if sw is not None:
                        sw.kernel.poll_digests(50)
                        for name, values in drain_digests(sw):
                            dev.listeners.digest(name, values)
            else:
                self.stop_event.wait(min(0.2, interval))
            if time.monotonic() >= due:
                due += interval
                if self.opts.stats_interval_s:
                    LOG.info("%s: %s", self.opts.name, self.snapshot())
                self.write_stats()

    def close(self) -> None:
        """Stop the server, detach from every port, unload the program and its maps."""
        from softswitch.switchd.serve import stop_server
        stop_server(self.server)
        self.server = None
        for att in self.attachments:
            try:
                att.detach()
            except Exception as exc:  # noqa: BLE001 - detach the others regardless
                LOG.warning("detaching from %s: %s", att.ifname, exc)
        self.attachments = []
        if self.xdp is not None:
            self.xdp.close()
            self.xdp = None
        if self.cpu is not None:
            try:
                self.cpu.close()
            except Exception as exc:  # noqa: BLE001 - close the rest regardless
                LOG.warning("removing the CPU port's veth pair: %s", exc)
            self.cpu = None
        if self.shaped:
            import subprocess

            from softswitch.targets.ebpf.shaping import unshaping_argv
            for ifname in self.shaped:
                subprocess.run(unshaping_argv(ifname, self.opts.netns), capture_output=True, check=False)
            self.shaped = []
        if self.switch is not None:
            LOG.info("%s: final statistics %s", self.opts.name, self.snapshot())
            self.switch.close()
            self.switch = None


def _load(opts: Any) -> Any:
    from softswitch.frontend.errors import P4Error
    from softswitch.switchd.errors import ProgramError
    from softswitch.targets.ebpf.switch import EbpfSwitch
    try:
        return EbpfSwitch.from_file(opts.program, include_dirs=opts.include_dirs,
                                    defines=opts.defines, name=opts.name, hook=opts.hook)
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
