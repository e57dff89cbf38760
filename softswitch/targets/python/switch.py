"""The software switch from Python: load a P4 program, configure it, send packets.

    sw = Switch.from_file("p4/examples/ipv4_forward.p4")
    sw.runtime.table_add("MyIngress.ipv4_lpm", [Lpm(0x0A000000, 8)], "MyIngress.ipv4_forward",
                         [0x000000000002, 2])
    sw.process(1, scapy_packet)          # -> [(2, b"...")]
    sw.send(1, scapy_packet)             # -> [(2, <Ether ...>)]
    outs, events = sw.process_packet(1, data, trace=True)

This is the Python target's switch; ``target=`` picks another registered target
(``softswitch.targets``): ``target="ebpf"`` returns an `EbpfSwitch` instead (the same
program in the kernel, the same `runtime` API; close it, or use it as a context
manager, to unload it); ``hook="xdp"`` generates it for the XDP hook instead of tc.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

from softswitch.architecture import Architecture
from softswitch.backends.python.program import CompiledProgram
from softswitch.runtime import SwitchRuntime
from softswitch.targets.python.pipeline import V1Switch
from softswitch.trace import TraceEvent
from softswitch.v1model.architecture import V1MODEL
from softswitch.v1model.jobs import OutputPacket


class Switch:
    """A compiled program on the v1model architecture plus its runtime API."""

    def __init__(self, program: CompiledProgram, *, clock_us: Callable[[], int] | None = None,
                 name: str = "softswitch") -> None:
        self.program = program
        self.v1 = V1Switch(program, clock_us=clock_us, name=name)
        self.runtime = SwitchRuntime(program, self.v1.pre)

    @classmethod
    def from_file(cls, path: str | Path, *, include_dirs: Sequence[str] = (),
                  defines: dict[str, str] | None = None, arch: Architecture = V1MODEL,
                  target: str = "python", **kw: Any) -> Any:
        """Preprocess, parse, check and compile `path` for `arch` (a `V1Model`; raises
        P4Error / CompileError) and `target`, a name in the registry
        (``softswitch.targets``: ``python``, a `Switch`; ``ebpf``, an `EbpfSwitch`)."""
        from softswitch.frontend.load import load_program
        checked = load_program(path, include_dirs=tuple(include_dirs), defines=defines)
        return cls._for_target(checked, arch, target, kw)

    @classmethod
    def from_source(cls, text: str, *, filename: str = "<string>", include_dirs: Sequence[str] = (),
                    defines: dict[str, str] | None = None, arch: Architecture = V1MODEL,
                    target: str = "python", **kw: Any) -> Any:
        from softswitch.frontend.load import load_source
        checked = load_source(text, filename=filename, include_dirs=tuple(include_dirs), defines=defines)
        return cls._for_target(checked, arch, target, kw)

    @classmethod
    def _for_target(cls, checked: Any, arch: Architecture, target: str, kw: dict[str, Any]) -> Any:
        from softswitch.targets import build
        return build(checked, arch, target=target, **kw)

    def close(self) -> None:
        """Nothing to release on the Python target (the eBPF target unloads here)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def process(self, port: int, packet: Any) -> list[tuple[int, bytes]]:
        """One packet (bytes or scapy) in on `port`; the packets out as (port, bytes)."""
        return self.v1.process(port, packet)

    def send(self, port: int, packet: Any) -> list[tuple[int, Any]]:
        """Scapy in, scapy out: each output decoded as an Ethernet frame."""
        import scapy.layers.inet  # noqa: F401  (binds IP/UDP/TCP to Ether)
        from scapy.layers.l2 import Ether
        return [(p, Ether(d)) for p, d in self.v1.process(port, packet)]

    def process_packet(self, port: int, data: bytes, *, trace: bool = False
                       ) -> tuple[list[OutputPacket], list[TraceEvent]]:
        return self.v1.process_packet(port, data, trace=trace)
