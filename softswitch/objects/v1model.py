"""v1model's extern instances as run-time objects (`softswitch.externs`, `ActionProfile`):
the same objects on every target (registered for `V1Model` in ``makers.py``)."""
from __future__ import annotations

from softswitch.action_profiles import ActionProfile
from softswitch.architecture import InstanceRequest, PythonInstanceLowering
from softswitch.errors import CompileError
from softswitch.externs import hashes
from softswitch.externs.stateful import (
    Counter,
    CounterType,
    DirectCounter,
    DirectMeter,
    Meter,
    Register,
)
from softswitch.frontend import types as T
from softswitch.lowering import value_width

_COUNTER_TYPES = {"packets": CounterType.PACKETS, "bytes": CounterType.BYTES,
                  "packets_and_bytes": CounterType.PACKETS_AND_BYTES}


def _counter_type(r: InstanceRequest, i: int) -> CounterType:
    member = r.enum_member(i)
    kind = _COUNTER_TYPES.get(member or str(r.args[i].const_value))
    if kind is None:
        raise CompileError(f"{r.loc}: {r.type_name} {r.name}: argument {i + 1} must be a "
                           f"CounterType/MeterType member")
    return kind


def _register(r: InstanceRequest) -> Register:
    if not r.type_args:
        raise CompileError(f"{r.loc}: {r.type_name} {r.name}: element type unknown")
    et = T.strip_newtype(r.type_args[0])
    bits = et.underlying if isinstance(et, T.SerEnumType) else et
    signed = isinstance(bits, T.BitsType) and bits.signed
    return Register(name=r.name, size=r.const(0), width=value_width(et), signed=signed)


def _action_selector(r: InstanceRequest) -> ActionProfile:
    algo = r.enum_member(0)
    if algo not in hashes.HASH_ALGORITHMS:
        raise CompileError(f"{r.loc}: action_selector {r.name}: unsupported hash algorithm {algo}")
    return ActionProfile(name=r.name, size=r.const(1), algorithm=algo, output_width=r.const(2))


V1MODEL_INSTANCES: dict[str, PythonInstanceLowering] = {
    "register": _register,
    "counter": lambda r: Counter(name=r.name, size=r.const(0), counter_type=_counter_type(r, 1)),
    "direct_counter": lambda r: DirectCounter(name=r.name, counter_type=_counter_type(r, 0)),
    "meter": lambda r: Meter(name=r.name, size=r.const(0), meter_type=_counter_type(r, 1)),
    "direct_meter": lambda r: DirectMeter(name=r.name, meter_type=_counter_type(r, 0)),
    "action_profile": lambda r: ActionProfile(name=r.name, size=r.const(0)),
    "action_selector": _action_selector,
}
