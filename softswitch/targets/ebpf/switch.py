"""`EbpfSwitch`: a program on the eBPF target with the Python target's API.

Both halves come from the program's lowered form: its run-time objects (tables with
their keys, actions and const entries, registers, counters, meters, digests, value
sets; `softswitch.objects`, the builder the Python target uses too), which
`SwitchRuntime`, the STF runner and the P4Runtime server drive, and the C of the kernel
program (`softswitch.backends.ebpf`), whose maps mirror those objects. Nothing of the
Python back end runs here. `process_packet` runs a packet through the loaded kernel
program (BPF_PROG_TEST_RUN), so everything that tests the Python target tests the
kernel program the same way.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self, TextIO

from softswitch.backends.ebpf.clones import (
    KIND_RECIRC,
    KIND_RESUBMIT,
    KernelReplicationEngine,
    mark_kind,
)
from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.hooks import DEFAULT_HOOK, hook_named, refuse_rate
from softswitch.backends.ebpf.kernel import LoadedProgram
from softswitch.backends.ebpf.maps import TableMirror
from softswitch.backends.ebpf.program import GeneratedProgram, generate_c
from softswitch.backends.ebpf.queues import queue_stats, set_queue
from softswitch.backends.ebpf.value_sets_c import ValueSetMirror
from softswitch.errors import SoftswitchError
from softswitch.objects import RuntimeObjects, program_objects
from softswitch.targets.ebpf.runtime import EbpfRuntime
from softswitch.trace import TraceEvent
from softswitch.v1model.jobs import OutputPacket

MAX_PASSES = 4096   # test-run passes (the packet, its copies, their loops) per injected packet


def _decl_named(checked: Any, name: str) -> Any:
    from softswitch.frontend import ast as A
    from softswitch.frontend.walk import walk
    short = name.rsplit(".", 1)[-1]
    for node in walk(checked.program):
        if isinstance(node, (A.InstantiationDecl, A.ValueSetDecl)) and node.name == short:
            return node
    return None


class EbpfSwitch:
    """A compiled program loaded into the kernel, with its runtime API (`runtime`)."""

    target = "ebpf"

    def __init__(self, program: RuntimeObjects, *, name: str = "softswitch",
                 dump_c: TextIO | None = None, hook: str = DEFAULT_HOOK, **_: Any) -> None:
        self.program = program
        self.name = name
        self.hook = hook_named(hook)
        self.generated: GeneratedProgram = generate_c(program.lowered, hook=hook,
                                                      profiles=program.action_profiles)
        if dump_c is not None:
            dump_c.write(self.generated.source)
            dump_c.flush()
        # run-time objects the kernel program has no copy of: refused, never ignored
        missing = [n for n in (*program.registers, *program.counters, *program.meters)
                   if n not in self.generated.externs]
        missing += [n for n in program.value_sets if n not in self.generated.value_sets]
        if missing:
            raise EbpfUnsupported(_decl_named(program.checked, missing[0]),
                                  f"counter, register, meter or value_set {missing[0]} outside "
                                  "the program's controls and parser")
        self.kernel = LoadedProgram(self.generated.source, name=name, hook=self.hook.name)
        self.pre = KernelReplicationEngine(self.kernel)
        self.mirrors: dict[str, TableMirror] = {}
        self.value_set_mirrors: list[ValueSetMirror] = []
        try:
            self.runtime = EbpfRuntime(program, self.pre, self.kernel, self.generated.externs)
            for vname, mapname in self.generated.value_sets.items():
                vm = ValueSetMirror(self.kernel, program.value_sets[vname], mapname)
                self.value_set_mirrors.append(vm)      # detached by close(), even on a failure
                vm.attach()
            for dname, ring in self.generated.digests.items():
                self.kernel.open_digests(ring, program.digests[dname])
            for tname, lay in self.generated.tables.items():
                table = program.tables[tname]
                mirror = TableMirror(self.kernel, table, lay)
                self.mirrors[tname] = mirror      # detached by close(), even on a failure
                mirror.sync_all()
                table.observers.append(mirror)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_checked(cls, checked: Any, **kw: Any) -> EbpfSwitch:
        return cls(program_objects(checked, kw.pop("arch", None)), **kw)

    @classmethod
    def from_file(cls, path: str | Path, *, include_dirs: Sequence[str] = (),
                  defines: dict[str, str] | None = None, **kw: Any) -> EbpfSwitch:
        from softswitch.frontend.load import load_program
        return cls.from_checked(load_program(path, include_dirs=tuple(include_dirs), defines=defines), **kw)

    @classmethod
    def from_source(cls, text: str, *, filename: str = "<string>", include_dirs: Sequence[str] = (),
                    defines: dict[str, str] | None = None, **kw: Any) -> EbpfSwitch:
        from softswitch.frontend.load import load_source
        return cls.from_checked(load_source(text, filename=filename, include_dirs=tuple(include_dirs),
                                            defines=defines), **kw)

    # ----------------------------------------------------------- packets
    def process_packet(self, port: int, data: bytes, *, trace: bool = False
                       ) -> tuple[list[OutputPacket], list[TraceEvent]]:
        """One packet through the kernel program; trace holds only in, out and drop events."""
        drop = self.program.arch.drop_port
        if not 0 <= port < drop:
            raise SoftswitchError(f"process: ingress port {port} outside 0..{drop - 1}")
        data = bytes(data)
        events: list[TraceEvent] = []
        if trace:
            events.append(TraceEvent("packet_in", "switch", {"port": port, "length": len(data)}))
        outputs: list[OutputPacket] = []
        # passes in the Python target's order (clones.py): copies that run ingress
        # (resubmit, recirculate) before those that run egress (clones, replicas, an
        # original waiting behind its I2E clones), each queue in order
        ingress: deque[tuple[int, bytes]] = deque([(0, data)])
        egress: deque[tuple[int, bytes]] = deque()
        passes = 0
        while ingress or egress:
            first = passes == 0
            mark, frame = ingress.popleft() if ingress else egress.popleft()
            passes += 1
            if passes > MAX_PASSES:
                raise SoftswitchError(f"process: more than {MAX_PASSES} passes for one packet")
            out_port, out, itype, marks = self.kernel.run_pass(port, frame, mark,
                                                               defer=not first and bool(egress))
            for m in marks:
                if mark_kind(m) == KIND_RECIRC:
                    ingress.append((m, out))       # the deparsed packet
                elif mark_kind(m) == KIND_RESUBMIT:
                    ingress.append((m, frame))
                else:
                    egress.append((m, frame))
            if out_port is None:
                if trace and not marks:
                    events.append(TraceEvent("drop", "kernel", {"reason": "dropped by the program",
                                                                "instance_type": itype}))
                continue
            if trace:
                events.append(TraceEvent("output", "kernel", {"port": out_port, "length": len(out),
                                                              "instance_type": itype}))
            outputs.append(OutputPacket(out_port, out, itype))
        if self.generated.digests:
            self.kernel.poll_digests(0)
        return outputs, events

    def process(self, port: int, packet: Any) -> list[tuple[int, bytes]]:
        outs, _ = self.process_packet(port, bytes(packet))
        return [(o.port, o.data) for o in outs]

    def send(self, port: int, packet: Any) -> list[tuple[int, Any]]:
        import scapy.layers.inet  # noqa: F401  (binds IP/UDP/TCP to Ether)
        from scapy.layers.l2 import Ether
        return [(p, Ether(d)) for p, d in self.process(port, packet)]

    # ----------------------------------------------------- traffic manager
    def set_queue(self, port: int, *, rate_bps: float | None = None,
                  depth_pkts: int | None = None) -> None:
        """Rate (bit/s, 0 = unpaced) and depth (packets) of `port`'s egress queue, checked
        as on the Python target (`backends.ebpf.queues`: the program's virtual queue)."""
        from softswitch.backends.ebpf.program import MAX_PORTS
        from softswitch.switchd.tm import check_depth, check_rate
        if not 0 <= port < MAX_PORTS:
            raise SoftswitchError(f"queue of port {port}: outside 0..{MAX_PORTS - 1}")
        refuse_rate(self.hook, port, rate_bps)
        set_queue(self.kernel, port,
                  rate_bps=None if rate_bps is None else check_rate(port, rate_bps),
                  depth_pkts=None if depth_pkts is None else check_depth(port, depth_pkts))

    def queue_stats(self, ports: Sequence[int]) -> dict[int, dict[str, float]]:
        """High-water mark, tail drops, rate and depth of each of `ports`' queues."""
        return queue_stats(self.kernel, list(ports))

    def close(self) -> None:
        """Detach the table observers and unload the program and its maps."""
        for tname, mirror in self.mirrors.items():
            obs = self.program.tables[tname].observers
            if mirror in obs:
                obs.remove(mirror)
            mirror.detach()
        self.mirrors = {}
        for vm in self.value_set_mirrors:
            vm.detach()
        self.value_set_mirrors = []
        runtime = getattr(self, "runtime", None)
        if runtime is not None:
            runtime.close()
        self.kernel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
