"""The runtime API on the eBPF target: `SwitchRuntime` whose counters, registers and
meters are the kernel's.

Tables need nothing here (their observers mirror every change); counters and registers
change in the kernel, so a read first copies the kernel's cells into the shared Python
objects (which the P4Runtime server then reads as on the Python target) and a write
goes to both. Meter configurations stay in the Python objects (reads answer from
them) and each write is copied into the kernel's cell.
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterator, Sequence
from typing import Any

from softswitch.backends.ebpf.kernel import LoadedProgram
from softswitch.backends.ebpf.meters_c import write_cell
from softswitch.externs.stateful import Counter, Meter, Register
from softswitch.runtime import SwitchRuntime
from softswitch.v1model.pre import ReplicationEngine


def _kernel_cells(tab: Any, size: int, cells: Sequence[int] | None) -> Iterator[tuple[int, Any]]:
    """(index, kernel cell) of an array map: the listed cells (those in range: a read of
    one index looks up one cell), or all of them in one batched lookup
    (BPF_MAP_LOOKUP_BATCH: ~20x faster than a lookup per cell for 512 cells, which was
    most of a link poll's cost on this target)."""
    if cells is not None:
        for i in cells:
            if 0 <= i < size:
                yield i, tab[ctypes.c_int(i)]
        return
    try:
        batch = list(tab.items_lookup_batch())
    except Exception:   # noqa: BLE001 - bcc raises a bare Exception when the kernel has no
        # batched lookups of array maps (before 5.6)
        batch = [(i, tab[ctypes.c_int(i)]) for i in range(size)]
    for key, cell in batch:
        i = int(getattr(key, "value", key))
        if i < size:
            yield i, cell


class EbpfRuntime(SwitchRuntime):
    """Control-plane API over the kernel program's maps."""

    def __init__(self, program: Any, pre: ReplicationEngine, kernel: LoadedProgram,
                 externs: dict[str, tuple[str, str, int, int]]) -> None:
        super().__init__(program, pre)
        self.kernel = kernel
        self.extern_maps = {name: kernel.table(mapname) for name, (_, mapname, _, _) in externs.items()}
        # meters: each configuration write (runtime API, STF, P4Runtime, reconcile) goes
        # to the kernel's cell through the Meter object's observer
        self._meter_hooks: list[tuple[Meter, Any]] = []
        for name, obj in program.meters.items():
            tab = self.extern_maps[name]
            hook = functools.partial(write_cell, tab)
            for i, cfg in enumerate(obj.configs):
                if cfg is not None:
                    hook(i, cfg)
            obj.observers.append(hook)
            self._meter_hooks.append((obj, hook))

    def close(self) -> None:
        """Detach from the program's meter objects (the kernel maps go with the program)."""
        for obj, hook in self._meter_hooks:
            if hook in obj.observers:
                obj.observers.remove(hook)
        self._meter_hooks = []

    def _map(self, name: str) -> Any:
        return self.extern_maps[name]

    # ------------------------------------------------------------ custom CRCs
    def hash_set_custom(self, algorithm: str, *, polynomial: int, initial: int = 0, final_xor: int = 0,
                        reflect_input: bool = True, reflect_output: bool = True) -> None:
        """As on the Python target (checked there), then into the kernel's table and cell."""
        super().hash_set_custom(algorithm, polynomial=polynomial, initial=initial, final_xor=final_xor,
                                reflect_input=reflect_input, reflect_output=reflect_output)
        self.kernel.set_custom_crc(algorithm, polynomial, initial, final_xor, reflect_input, reflect_output)

    # ---------------------------------------------------------------- counters
    def counter(self, name: str, cells: Sequence[int] | None = None) -> Counter:
        obj = super().counter(name)
        for i, cell in _kernel_cells(self._map(obj.name), obj.size, cells):
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
    def register(self, name: str, cells: Sequence[int] | None = None) -> Register:
        obj = super().register(name)
        half = 1 << (obj.width - 1)
        for i, cell in _kernel_cells(self._map(obj.name), obj.size, cells):
            v = int(getattr(cell, "value", cell))
            # the kernel keeps an int<W> cell as its W-bit pattern; the Python object as the
            # signed value (what the Python target's cells hold)
            obj.cells[i] = ((v & obj.mask) ^ half) - half if obj.signed else v
        return obj

    def register_write(self, name: str, index: int, value: int) -> None:
        super().register_write(name, index, value)
        obj = super().register(name)
        self._map(obj.name)[ctypes.c_int(index)] = ctypes.c_uint64(obj.cells[index] & obj.mask)

    def register_reset(self, name: str) -> None:
        super().register_reset(name)
        obj = super().register(name)
        tab = self._map(obj.name)
        for i in range(obj.size):
            tab[ctypes.c_int(i)] = ctypes.c_uint64(0)
