"""Counter, direct counter, meter, direct meter and register entries.

Why together: they share the P4Runtime rules for indexed state: only MODIFY
writes (the cells always exist), an index is needed for a write, and a read with
id 0 means every object and an unset index every cell (BMv2 behaves the same).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P

from softswitch.errors import RuntimeApiError
from softswitch.externs.stateful import MeterConfig
from softswitch.p4runtime.codec import bitwidth_of, decode_p4data, encode_p4data
from softswitch.p4runtime.errors import P4RuntimeError, invalid, unimplemented
from softswitch.p4runtime.schema import ArrayInfo, TableInfo
from softswitch.p4runtime.state import PipelineState
from softswitch.p4runtime.table_entries import encode_entry, find_entry, meter_config_of
from softswitch.tables import TableEntry

T = TypeVar("T")


def _modify_only(utype: int, what: str) -> None:
    if utype != P.Update.MODIFY:
        raise invalid(f"{what}: only MODIFY is allowed (got {P.Update.Type.Name(utype)}); "
                      f"the cells always exist")


def _write_index(has_index: bool, index: int, what: str) -> int:
    if not has_index:
        raise unimplemented(f"{what}: a write to every index (no index given) is not supported")
    if index < 0:
        raise invalid(f"{what}: negative index {index}")
    return index


def _read_indexes(has_index: bool, index: int, size: int, what: str) -> range:
    if not has_index:
        return range(size)
    if index < 0 or index >= size:
        raise invalid(f"{what}: index {index} outside 0..{size - 1}")
    return range(index, index + 1)


def _runtime(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


def _resolve(getter: Callable[[str], T], name: str) -> T:
    """The runtime object of a P4Info name (NOT_FOUND/... mapped from the runtime error)."""
    try:
        return getter(name)
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


def _counter_data(unit: int, packets: int, nbytes: int) -> P.CounterData:
    return P.CounterData(packet_count=0 if unit == P4I.CounterSpec.BYTES else packets,
                         byte_count=0 if unit == P4I.CounterSpec.PACKETS else nbytes)


def _meter_proto(cfg: MeterConfig) -> P.MeterConfig:
    return P.MeterConfig(cir=cfg.cir, cburst=cfg.cburst, pir=cfg.pir, pburst=cfg.pburst)


# ------------------------------------------------------------------ counters
def write_counter(st: PipelineState, utype: int, ce: P.CounterEntry) -> None:
    c = st.schema.counter(ce.counter_id)
    what = f"counter {c.name}"
    _modify_only(utype, what)
    idx = _write_index(ce.HasField("index"), ce.index.index, what)
    rt = st.pipeline.switch.runtime
    _runtime(lambda: rt.counter_write(c.name, idx, ce.data.packet_count, ce.data.byte_count))


def read_counters(st: PipelineState, q: P.CounterEntry) -> Iterator[P.CounterEntry]:
    infos = [st.schema.counter(q.counter_id)] if q.counter_id else list(st.schema.counters.values())
    for c in infos:
        rt = st.pipeline.switch.runtime
        wanted = [q.index.index] if q.HasField("index") else None
        obj = _resolve(functools.partial(rt.counter, cells=wanted), c.name)
        for i in _read_indexes(q.HasField("index"), q.index.index, obj.size, f"counter {c.name}"):
            out = P.CounterEntry(counter_id=c.id)
            out.index.index = i
            out.data.CopyFrom(_counter_data(c.unit, obj.packets[i], obj.bytes[i]))
            yield out


# ------------------------------------------------------------------- meters
def write_meter(st: PipelineState, utype: int, me: P.MeterEntry) -> None:
    m = st.schema.meter(me.meter_id)
    what = f"meter {m.name}"
    _modify_only(utype, what)
    idx = _write_index(me.HasField("index"), me.index.index, what)
    cfg = meter_config_of(me.config, f"{what}[{idx}]") if me.HasField("config") else None
    rt = st.pipeline.switch.runtime
    _runtime(lambda: rt.meter_set(m.name, idx, cfg))


def read_meters(st: PipelineState, q: P.MeterEntry) -> Iterator[P.MeterEntry]:
    infos = [st.schema.meter(q.meter_id)] if q.meter_id else list(st.schema.meters.values())
    for m in infos:
        obj = _resolve(st.pipeline.switch.runtime.meter, m.name)
        for i in _read_indexes(q.HasField("index"), q.index.index, obj.size, f"meter {m.name}"):
            out = P.MeterEntry(meter_id=m.id)
            out.index.index = i
            cfg = obj.configs[i]
            if cfg is not None:
                out.config.CopyFrom(_meter_proto(cfg))
            yield out


# ---------------------------------------------------------------- registers
def write_register(st: PipelineState, utype: int, re_: P.RegisterEntry) -> None:
    r = st.schema.register(re_.register_id)
    what = f"register {r.name}"
    _modify_only(utype, what)
    idx = _write_index(re_.HasField("index"), re_.index.index, what)
    assert r.type_spec is not None
    value = decode_p4data(re_.data, r.type_spec, f"{what}[{idx}]")
    rt = st.pipeline.switch.runtime
    _runtime(lambda: rt.register_write(r.name, idx, value))


def read_registers(st: PipelineState, q: P.RegisterEntry) -> Iterator[P.RegisterEntry]:
    infos = [st.schema.register(q.register_id)] if q.register_id else list(st.schema.registers.values())
    for r in infos:
        rt = st.pipeline.switch.runtime
        wanted = [q.index.index] if q.HasField("index") else None
        obj = _resolve(functools.partial(rt.register, cells=wanted), r.name)
        width, signed = bitwidth_of(r.type_spec) if r.type_spec is not None else (obj.width, False)
        for i in _read_indexes(q.HasField("index"), q.index.index, obj.size, f"register {r.name}"):
            out = P.RegisterEntry(register_id=r.id)
            out.index.index = i
            out.data.CopyFrom(encode_p4data(obj.cells[i], width, signed))
            yield out


# ------------------------------------------------- direct counters / meters
def _direct_target(st: PipelineState, te: P.TableEntry, attr: str, kind: str
                   ) -> tuple[TableInfo, TableEntry]:
    t = st.schema.table(te.table_id, f"direct {kind} entry")
    if not getattr(t, attr):
        raise invalid(f"table {t.name} has no direct {kind}")
    if te.is_default_action:
        raise unimplemented(f"table {t.name}: the direct {kind} of the default entry")
    rt = st.runtime_table(t)
    return t, find_entry(st, t, rt, te)


def write_direct_counter(st: PipelineState, utype: int, dce: P.DirectCounterEntry) -> None:
    _modify_only(utype, "direct counter entry")
    t, e = _direct_target(st, dce.table_entry, "direct_counter_id", "counter")
    if dce.data.packet_count < 0 or dce.data.byte_count < 0:
        raise invalid(f"table {t.name}: direct counter: negative value")
    st.runtime_table(t).set_entry_counters(e, dce.data.packet_count, dce.data.byte_count)


def write_direct_meter(st: PipelineState, utype: int, dme: P.DirectMeterEntry) -> None:
    _modify_only(utype, "direct meter entry")
    t, e = _direct_target(st, dme.table_entry, "direct_meter_id", "meter")
    cfg = meter_config_of(dme.config, f"table {t.name} direct meter") if dme.HasField("config") else None
    st.runtime_table(t).set_entry_meter(e, cfg)


def _direct_tables(st: PipelineState, te: P.TableEntry, attr: str, kind: str) -> list[TableInfo]:
    if te.table_id == 0:
        return [t for t in st.schema.tables.values() if getattr(t, attr)]
    t = st.schema.table(te.table_id, f"direct {kind} entry")
    if not getattr(t, attr):
        raise invalid(f"table {t.name} has no direct {kind}")
    return [t]


def _direct_entries(st: PipelineState, t: TableInfo, te: P.TableEntry) -> list[TableEntry]:
    rt = st.runtime_table(t)
    if len(te.match):
        try:
            return [find_entry(st, t, rt, te)]
        except P4RuntimeError as exc:
            if exc.code.name == "NOT_FOUND":
                return []
            raise
    return rt.entries()


def read_direct_counters(st: PipelineState, q: P.DirectCounterEntry) -> Iterator[P.DirectCounterEntry]:
    for t in _direct_tables(st, q.table_entry, "direct_counter_id", "counter"):
        rt = st.runtime_table(t)
        unit = st.schema.direct_counters[t.direct_counter_id].unit
        for e in _direct_entries(st, t, q.table_entry):
            out = P.DirectCounterEntry()
            encode_entry(st, t, rt, e, counter=False, meter=False, out=out.table_entry)
            out.data.CopyFrom(_counter_data(unit, e.packets, e.bytes))
            yield out


def read_direct_meters(st: PipelineState, q: P.DirectMeterEntry) -> Iterator[P.DirectMeterEntry]:
    for t in _direct_tables(st, q.table_entry, "direct_meter_id", "meter"):
        rt = st.runtime_table(t)
        for e in _direct_entries(st, t, q.table_entry):
            out = P.DirectMeterEntry()
            encode_entry(st, t, rt, e, counter=False, meter=False, out=out.table_entry)
            if e.meter_config is not None:
                out.config.CopyFrom(_meter_proto(e.meter_config))
            yield out


__all__ = ["ArrayInfo", "read_counters", "read_direct_counters", "read_direct_meters", "read_meters",
           "read_registers", "write_counter", "write_direct_counter", "write_direct_meter",
           "write_meter", "write_register"]
