"""ValueSetEntry: the members of a parser ``value_set``.

Why a whole-set write: P4Runtime only MODIFYs a value set, replacing all its
members at once. The runtime keeps each member as one (value, mask) over the
concatenated fields of the element type, so each FieldMatch (exact, or ternary
where the P4Info allows it) becomes a slice of that pair; the new members are all
checked before the old ones are dropped.
"""
from __future__ import annotations

from collections.abc import Iterator

import grpc
from p4.v1 import p4runtime_pb2 as P

from softswitch.errors import RuntimeApiError
from softswitch.p4runtime.codec import decode_bits, encode_bits
from softswitch.p4runtime.errors import P4RuntimeError, invalid
from softswitch.p4runtime.schema import MatchFieldInfo
from softswitch.p4runtime.state import PipelineState


def _decode_member(fields: tuple[MatchFieldInfo, ...], member: P.ValueSetMember, where: str) -> tuple[int, int]:
    given: dict[int, P.FieldMatch] = {}
    for fm in member.match:
        if fm.field_id not in {f.id for f in fields}:
            raise invalid(f"{where}: no field with id {fm.field_id}")
        if fm.field_id in given:
            raise invalid(f"{where}: field {fm.field_id} given twice")
        given[fm.field_id] = fm
    value = mask = 0
    for f in fields:
        full = (1 << f.bitwidth) - 1
        fm = given.get(f.id)
        kind = fm.WhichOneof("field_match_type") if fm is not None else None
        fwhere = f"{where}: field {f.name} (bit<{f.bitwidth}>)"
        if fm is None:
            if f.kind == "exact":
                raise invalid(f"{fwhere}: exact fields cannot be omitted")
            v = m = 0
        elif kind == "exact":
            v, m = decode_bits(fm.exact.value, f.bitwidth, fwhere), full
        elif kind == "ternary" and f.kind == "ternary":
            v = decode_bits(fm.ternary.value, f.bitwidth, fwhere)
            m = decode_bits(fm.ternary.mask, f.bitwidth, fwhere)
            if v & ~m:
                raise invalid(f"{fwhere}: value {v:#x} has bits outside mask {m:#x}")
        else:
            raise invalid(f"{fwhere}: a {kind or 'empty'} match for a {f.kind} field")
        value = (value << f.bitwidth) | v
        mask = (mask << f.bitwidth) | m
    return value, mask


def write_value_set(st: PipelineState, utype: int, vse: P.ValueSetEntry) -> None:
    name = st.schema.value_set(vse.value_set_id)
    where = f"value_set {name}"
    if utype != P.Update.MODIFY:
        raise invalid(f"{where}: only MODIFY is allowed (it replaces every member)")
    fields = st.schema.value_set_fields[vse.value_set_id]
    members = [_decode_member(fields, m, f"{where} member {i}") for i, m in enumerate(vse.members)]
    rt = st.pipeline.switch.runtime
    try:
        vs = rt.program.value_sets[name]
    except KeyError:
        raise invalid(f"{where}: in the P4Info but not run by softswitch") from None
    if len(members) > vs.size:
        raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"{where}: {len(members)} members, but the set holds {vs.size}")
    try:
        rt.value_set_clear(name)
        for value, mask in members:
            rt.value_set_add(name, value, mask)
    except RuntimeApiError as exc:  # checked above, so only a back-end change gets here
        raise P4RuntimeError.from_runtime(exc) from None


def read_value_sets(st: PipelineState, q: P.ValueSetEntry) -> Iterator[P.ValueSetEntry]:
    ids = [q.value_set_id] if q.value_set_id else sorted(st.schema.value_sets)
    for vid in ids:
        name = st.schema.value_set(vid)
        fields = st.schema.value_set_fields[vid]
        vs = st.pipeline.switch.runtime.program.value_sets.get(name)
        out = P.ValueSetEntry(value_set_id=vid)
        for value, mask in (vs.members if vs is not None else []):
            mem = out.members.add()
            shift = sum(f.bitwidth for f in fields)
            for f in fields:
                shift -= f.bitwidth
                full = (1 << f.bitwidth) - 1
                v, m = (value >> shift) & full, (mask >> shift) & full
                if m == 0 and f.kind != "exact":
                    continue
                fm = mem.match.add(field_id=f.id)
                if m == full:
                    fm.exact.value = encode_bits(v)
                else:
                    fm.ternary.value, fm.ternary.mask = encode_bits(v), encode_bits(m)
        yield out
