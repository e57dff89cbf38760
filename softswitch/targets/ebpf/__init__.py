"""The eBPF target (``--target ebpf``): the program as C (``softswitch.backends.ebpf``)
loaded into the kernel at tc or XDP, its tables and externs in BPF maps.

Modules: `switch` (`EbpfSwitch`, the Python API: the loaded program, its map mirrors,
its test runs), `runtime` (counters, registers, meters in maps behind the runtime
API), `daemon` (the switch process: attach to every port, serve P4Runtime),
`cpu_port` (the CPU port's veth pair), `xdp_attach` (XDP links, native or generic).
"""
from __future__ import annotations

from typing import Any

from softswitch.architecture import Architecture
from softswitch.targets.base import Target


class EbpfTarget(Target):
    name = "ebpf"
    summary = "the pipeline as a kernel program at tc or XDP on every port (root, bcc)"
    hooks = ("tc", "xdp")
    dumps_source = "C"

    def build(self, checked: Any, arch: Architecture, **kw: Any) -> Any:
        from softswitch.targets.ebpf.switch import EbpfSwitch
        kw.pop("clock_us", None)
        return EbpfSwitch.from_checked(checked, arch=arch, **kw)

    def daemon(self, opts: Any) -> Any:
        from softswitch.targets.ebpf.daemon import EbpfSwitchd
        return EbpfSwitchd(opts)
