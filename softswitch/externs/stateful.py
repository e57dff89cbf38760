"""Stateful externs: counters, meters (two-rate three-colour), registers, digests.

Meters follow RFC 2698 in colour-blind mode as BMv2 does: two token buckets
(committed and peak), rates in units per second, bursts in units; a packet is
RED if the peak bucket lacks the tokens, else YELLOW if the committed bucket
lacks them, else GREEN. An unconfigured meter marks everything GREEN. Time
comes from the caller (µs) so tests are deterministic.
"""
from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import ExternError, RuntimeApiError, RuntimeErrorCode


class CounterType(enum.Enum):
    PACKETS = "packets"
    BYTES = "bytes"
    PACKETS_AND_BYTES = "packets_and_bytes"


class Color(enum.IntEnum):
    """v1model meter colours (V1MODEL_METER_COLOR_*)."""

    GREEN = 0
    YELLOW = 1
    RED = 2


def _check_index(kind: str, name: str, index: int, size: int) -> None:
    if not 0 <= index < size:
        raise RuntimeApiError(RuntimeErrorCode.INDEX_OUT_OF_RANGE,
                              f"{kind} {name}: index {index} outside 0..{size - 1}")


class Counter:
    """An indexed counter array (``counter``); each cell counts packets and bytes."""

    def __init__(self, *, name: str, size: int, counter_type: CounterType) -> None:
        self.name = name
        self.size = size
        self.counter_type = counter_type
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index: int, nbytes: int) -> None:
        """Data-plane ``count``: BMv2 ignores an out-of-range index (nothing counted)."""
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes

    def read(self, index: int) -> tuple[int, int]:
        _check_index("counter", self.name, index, self.size)
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        _check_index("counter", self.name, index, self.size)
        if packets < 0 or nbytes < 0:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE,
                                  f"counter {self.name}[{index}]: negative value {packets}/{nbytes}")
        self.packets[index], self.bytes[index] = packets, nbytes

    def reset(self) -> None:
        self.packets = [0] * self.size
        self.bytes = [0] * self.size


@dataclass(slots=True, kw_only=True)
class MeterConfig:
    """Committed/peak information rate (units per second) and burst sizes (units)."""

    cir: int
    cburst: int
    pir: int
    pburst: int

    def check(self, where: str) -> None:
        if min(self.cir, self.cburst, self.pir, self.pburst) < 0 or self.pir < self.cir:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE,
                                  f"{where}: bad meter config {self} (need non-negative, pir >= cir)")


@dataclass(slots=True)
class MeterState:
    """Token counts of one meter cell and the time (µs) they were last refilled."""

    tc: float = 0.0
    tp: float = 0.0
    last_us: int | None = None


def meter_execute(config: MeterConfig | None, state: MeterState, amount: int, now_us: int) -> Color:
    """RFC 2698 colour-blind marking of `amount` units at time `now_us`."""
    if config is None:
        return Color.GREEN
    if state.last_us is None:
        state.tc, state.tp = float(config.cburst), float(config.pburst)
    else:
        dt = max(0, now_us - state.last_us) / 1e6
        state.tc = min(float(config.cburst), state.tc + dt * config.cir)
        state.tp = min(float(config.pburst), state.tp + dt * config.pir)
    state.last_us = now_us
    if state.tp < amount:
        return Color.RED
    if state.tc < amount:
        state.tp -= amount
        return Color.YELLOW
    state.tp -= amount
    state.tc -= amount
    return Color.GREEN


class Meter:
    """An indexed meter array (``meter``); `meter_type` says whether it meters packets or bytes."""

    def __init__(self, *, name: str, size: int, meter_type: CounterType) -> None:
        self.name = name
        self.size = size
        self.meter_type = meter_type
        self.configs: list[MeterConfig | None] = [None] * size
        self.states = [MeterState() for _ in range(size)]
        # a kernel target's copy of the cells: told of each configuration write
        self.observers: list[Callable[[int, MeterConfig | None], None]] = []

    def execute(self, index: int, nbytes: int, now_us: int) -> int:
        if not 0 <= index < self.size:
            return int(Color.GREEN)
        amount = nbytes if self.meter_type is CounterType.BYTES else 1
        return int(meter_execute(self.configs[index], self.states[index], amount, now_us))

    def set_config(self, index: int, config: MeterConfig | None) -> None:
        _check_index("meter", self.name, index, self.size)
        if config is not None:
            config.check(f"meter {self.name}[{index}]")
        self.configs[index] = config
        self.states[index] = MeterState()
        for observe in self.observers:
            observe(index, config)

    def get_config(self, index: int) -> MeterConfig | None:
        _check_index("meter", self.name, index, self.size)
        return self.configs[index]


class Register:
    """A register array of `width`-bit cells (``register<bit<W>>(size)``), zero at start."""

    def __init__(self, *, name: str, size: int, width: int, signed: bool = False) -> None:
        self.name = name
        self.size = size
        self.width = width
        self.signed = signed
        self.mask = (1 << width) - 1
        self.cells = [0] * size

    def read(self, index: int) -> int:
        """Data-plane read: BMv2 returns 0 for an out-of-range index (documented in v1model.p4)."""
        if 0 <= index < self.size:
            return self.cells[index]
        return 0

    def write(self, index: int, value: int) -> None:
        """Data-plane write: out-of-range writes are ignored."""
        if 0 <= index < self.size:
            self.cells[index] = value

    def control_read(self, index: int) -> int:
        _check_index("register", self.name, index, self.size)
        return self.cells[index]

    def control_write(self, index: int, value: int) -> None:
        _check_index("register", self.name, index, self.size)
        if self.signed:
            lo, hi = -(1 << (self.width - 1)), (1 << (self.width - 1)) - 1
        else:
            lo, hi = 0, self.mask
        if not isinstance(value, int) or not lo <= value <= hi:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE,
                                  f"register {self.name}[{index}]: value {value!r} does not fit "
                                  f"{'int' if self.signed else 'bit'}<{self.width}>")
        self.cells[index] = value

    def reset(self) -> None:
        self.cells = [0] * self.size


@dataclass(slots=True, kw_only=True)
class DigestQueue:
    """Digests sent by the data plane, waiting for the control plane (bounded)."""

    name: str
    field_names: list[str]
    maxlen: int = 4096
    queue: deque = field(default_factory=deque)
    dropped: int = 0

    def push(self, values: tuple[Any, ...]) -> None:
        if len(self.queue) >= self.maxlen:
            self.dropped += 1
            return
        self.queue.append(values)

    def pop_all(self) -> list[tuple[Any, ...]]:
        out = list(self.queue)
        self.queue.clear()
        return out


def check_extern_size(kind: str, name: str, size: int) -> None:
    if size <= 0:
        raise ExternError(f"{kind} {name}: size must be positive, got {size}")


class DirectCounter:
    """``direct_counter``: the counts live in the entries of the table that owns it."""

    def __init__(self, *, name: str, counter_type: CounterType) -> None:
        self.name = name
        self.counter_type = counter_type
        self.table: Any = None


class DirectMeter:
    """``direct_meter``: config/state per entry; `color` is the result of the last lookup."""

    def __init__(self, *, name: str, meter_type: CounterType) -> None:
        self.name = name
        self.meter_type = meter_type
        self.table: Any = None
        self.color = int(Color.GREEN)

    def execute_entry(self, entry: Any, nbytes: int, now_us: int) -> None:
        if entry.meter_state is None:
            entry.meter_state = MeterState()
        amount = nbytes if self.meter_type is CounterType.BYTES else 1
        self.color = int(meter_execute(entry.meter_config, entry.meter_state, amount, now_us))


class ValueSet:
    """A parser ``value_set``: values (optionally with a mask) the control plane fills."""

    def __init__(self, *, name: str, size: int, width: int) -> None:
        self.name = name
        self.size = size
        self.width = width
        self.members: list[tuple[int, int]] = []
        # a kernel target's copy (the eBPF target's maps): told after each change
        self.observers: list[Callable[[ValueSet], None]] = []

    def add(self, value: int, mask: int | None = None) -> None:
        full = (1 << self.width) - 1
        m = full if mask is None else mask
        if len(self.members) >= self.size:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL, f"value_set {self.name}: full ({self.size})")
        if not 0 <= value <= full or not 0 <= m <= full:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE,
                                  f"value_set {self.name}: value {value:#x}/{m:#x} too wide for {self.width} bits")
        self.members.append((value & m, m))
        self._notify()

    def clear(self) -> None:
        self.members = []
        self._notify()

    def _notify(self) -> None:
        for observe in self.observers:
            observe(self)

    def match(self, key: int) -> bool:
        return any(key & m == v for v, m in self.members)
