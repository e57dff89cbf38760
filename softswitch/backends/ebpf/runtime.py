"""The runtime API on the eBPF target: `SwitchRuntime` whose counters and registers
are the kernel's.

Tables need nothing here (their observers mirror every change); counters and registers
change in the kernel, so a read first copies the kernel's cells into the shared Python
objects (which the P4Runtime server then reads as on the Python target) and a write
goes to both.
"""
from __future__ import annotations

import ctypes
from typing import Any

from softswitch.backends.ebpf.kernel import LoadedProgram
from softswitch.externs.stateful import Counter, Register
from softswitch.runtime import SwitchRuntime
from softswitch.v1model.pre import ReplicationEngine


class EbpfRuntime(SwitchRuntime):
    """Control-plane API over the kernel program's maps."""

    def __init__(self, program: Any, pre: ReplicationEngine, kernel: LoadedProgram,
                 externs: dict[str, tuple[str, str, int, int]]) -> None:
        super().__init__(program, pre)
        self.kernel = kernel
        self.extern_maps = {name: kernel.table(mapname) for name, (_, mapname, _, _) in externs.items()}

    def _map(self, name: str) -> Any:
        return self.extern_maps[name]

    # ---------------------------------------------------------------- counters
    def counter(self, name: str) -> Counter:
        obj = super().counter(name)
        tab = self._map(obj.name)
        for i in range(obj.size):
            cell = tab[ctypes.c_int(i)]
            obj.packets[i], obj.bytes[i] = int(cell.packets), int(cell.bytes)
        return obj

    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None:
        super().counter_write(name, index, packets, nbytes)
        obj = super().counter(name)
        tab = self._map(obj.name)
        cell = tab.Leaf()
        cell.packets, cell.bytes = packets, nbytes
        tab[ctypes.c_int(index)] = cell

    # --------------------------------------------------------------- registers
    def register(self, name: str) -> Register:
        obj = super().register(name)
        tab = self._map(obj.name)
        for i in range(obj.size):
            obj.cells[i] = int(tab[ctypes.c_int(i)].value)
        return obj

    def register_write(self, name: str, index: int, value: int) -> None:
        super().register_write(name, index, value)
        obj = super().register(name)
        self._map(obj.name)[ctypes.c_int(index)] = ctypes.c_uint64(obj.cells[index])

    def register_reset(self, name: str) -> None:
        super().register_reset(name)
        obj = super().register(name)
        tab = self._map(obj.name)
        for i in range(obj.size):
            tab[ctypes.c_int(i)] = ctypes.c_uint64(0)
