"""`RuntimeObjects`: a program's control-plane objects by P4Info name."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4.config.v1 import p4info_pb2 as P4I

from softswitch import tables as TB
from softswitch.action_profiles import ActionProfile
from softswitch.architecture import Architecture
from softswitch.externs.stateful import (
    Counter,
    DigestQueue,
    DirectCounter,
    DirectMeter,
    Meter,
    Register,
    ValueSet,
)
from softswitch.lowering import LoweredProgram


@dataclass(slots=True, kw_only=True)
class RuntimeObjects:
    """What the control plane of one program reads and writes, whatever target runs it.

    `SwitchRuntime`, the STF runner and the P4Runtime server drive these objects; a
    target runs the program against them (the Python target's generated code calls
    them) or keeps a copy and observes them (the eBPF target's maps)."""

    checked: Any
    arch: Architecture
    lowered: LoweredProgram
    tables: dict[str, TB.Table]
    registers: dict[str, Register]
    counters: dict[str, Counter]
    meters: dict[str, Meter]
    direct_counters: dict[str, DirectCounter]
    direct_meters: dict[str, DirectMeter]
    digests: dict[str, DigestQueue]
    value_sets: dict[str, ValueSet]
    action_profiles: dict[str, ActionProfile]
    actions: dict[str, list[tuple[str, int]]]     # action -> its action data (name, width)
    instances: dict[str, Any]                     # every extern instance's object, any class

    @property
    def errors(self) -> list[str]:
        """The program's error names in code order (a parser error's code is its index)."""
        return self.lowered.errors

    def error_code(self, name: str) -> int:
        return self.errors.index(name)

    def error_name(self, code: int) -> str:
        return self.errors[code] if 0 <= code < len(self.errors) else str(code)

    def p4info(self) -> P4I.P4Info:
        """The program's P4Info (p4c's names and ids) from the lowered form: the names
        these objects go by (a new message each call: callers may change it)."""
        from softswitch.p4info import build_p4info
        return build_p4info(self.checked, self.lowered)

    def bind_hash(self, algorithm: str, fn: Callable[[bytes], int]) -> None:
        """Make the program compute `algorithm` (one of the architecture's
        `custom_hashes`) with `fn`. The objects alone run no code; a target that runs
        code of its own against them (the Python back end's `CompiledProgram`) rebinds it."""

    def instance(self, name: str) -> Any:
        """The object of extern instance `name` (a control-plane name); None if none."""
        return self.instances.get(name)
