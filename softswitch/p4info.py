"""P4Info (P4Runtime's description of a program) from a checked program, like p4c's
``--p4runtime-files``.

Why the same ids as p4c: controllers and tests written against BMv2 keep their P4Info
ids when the program runs on softswitch.  An id is the object-type prefix
(``P4Ids.Prefix``) in the top byte and the low 24 bits of the Jenkins one-at-a-time
hash of the fully qualified control-plane name; ``@id`` wins; collisions are resolved
by linear probing over the hash value, names taken in sorted order.  The names, and
each table's keys, actions, default action and size, are the lowered program's
(``softswitch.lowering``), the ones the runtime and both back ends use; which objects
are described and which actions keep their parameters follow p4c's front end (see
``softswitch.p4info_walk``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2 as P4I

from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.lowering import LoweredProgram, LoweredTable
from softswitch.lowering.names import control_plane_name
from softswitch.p4info_walk import Collector, P4InfoError, Symbol

__all__ = ["P4InfoError", "build_p4info", "control_plane_name", "format_p4info", "jenkins_one_at_a_time",
           "write_p4info"]

PREFIX = {
    "action": P4I.P4Ids.ACTION, "table": P4I.P4Ids.TABLE, "value_set": P4I.P4Ids.VALUE_SET,
    "controller_header": P4I.P4Ids.CONTROLLER_HEADER, "action_profile": P4I.P4Ids.ACTION_PROFILE,
    "counter": P4I.P4Ids.COUNTER, "direct_counter": P4I.P4Ids.DIRECT_COUNTER,
    "meter": P4I.P4Ids.METER, "direct_meter": P4I.P4Ids.DIRECT_METER,
    "register": P4I.P4Ids.REGISTER, "digest": P4I.P4Ids.DIGEST,
}
_MATCH = {"exact": P4I.MatchField.EXACT, "lpm": P4I.MatchField.LPM, "ternary": P4I.MatchField.TERNARY,
          "range": P4I.MatchField.RANGE, "optional": P4I.MatchField.OPTIONAL}
_COUNTER_UNIT = {"packets": P4I.CounterSpec.PACKETS, "bytes": P4I.CounterSpec.BYTES,
                 "packets_and_bytes": P4I.CounterSpec.BOTH}
_METER_UNIT = {"packets": P4I.MeterSpec.PACKETS, "bytes": P4I.MeterSpec.BYTES}
_HIDDEN_ANNOTATIONS = frozenset({"name", "id", "defaultonly", "tableonly", "hidden"})
# symbols by (kind, id of a declaration) and by (kind, control-plane name)
_Index = dict[tuple[str, int | str], Symbol]
_DEFAULT_TABLE_SIZE = 1024


def jenkins_one_at_a_time(name: str) -> int:
    """The 32-bit hash p4c applies to control-plane names."""
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def _annotation_text(ann: A.Annotation) -> str:
    if not ann.args and not ann.kv:
        return f"@{ann.name}"
    parts = []
    for a in ann.args:
        if isinstance(a, A.StringLiteral):
            parts.append('"' + a.value.replace("\\", "\\\\").replace('"', '\\"') + '"')
        else:
            parts.append(expr_text(a))
    return f"@{ann.name}({', '.join(parts)})"


def _preamble(pre: Any, sym: Symbol, alias: str) -> None:
    pre.id = sym.id
    pre.name = sym.extra.get("display_name", sym.name)
    pre.alias = sym.extra.get("display_name", alias)
    for ann in getattr(sym.decl, "annotations", []):
        if ann.name not in _HIDDEN_ANNOTATIONS:
            pre.annotations.append(_annotation_text(ann))


def _shortest_suffixes(names: list[str]) -> dict[str, str]:
    counts: dict[tuple[str, ...], int] = {}
    uniq = sorted(set(names))
    for n in uniq:
        comps = n.split(".")
        for k in range(1, len(comps) + 1):
            key = tuple(comps[-k:])
            counts[key] = counts.get(key, 0) + 1
    out = {}
    for n in uniq:
        comps = n.split(".")
        for k in range(1, len(comps) + 1):
            if counts[tuple(comps[-k:])] < 2:
                out[n] = ".".join(comps[-k:])
                break
        else:
            out[n] = n
    return out


def _width(t: T.P4Type | None, what: str, loc: A.SourceLoc | None) -> int:
    """Bit width of a P4Runtime-visible value, or a located error naming it."""
    if isinstance(t, T.ErrorType):
        return 0
    try:
        return T.bit_width(t) if t is not None else 0
    except ValueError:
        raise P4InfoError(loc, f"{what} has type {t}, which P4Runtime cannot represent as a bit string") from None


def _type_spec(spec: Any, t: T.P4Type) -> None:
    base = T.strip_newtype(t)
    if isinstance(base, T.BoolType):
        spec.bool.SetInParent()
    elif isinstance(base, T.BitsType):
        if base.signed:
            spec.bitstring.int.bitwidth = base.width
        else:
            spec.bitstring.bit.bitwidth = base.width
    elif isinstance(base, T.VarbitType):
        spec.bitstring.varbit.max_bitwidth = base.max_width
    elif isinstance(base, T.StructType):
        spec.struct.name = base.name
    elif isinstance(base, T.HeaderType):
        spec.header.name = base.name
    elif isinstance(base, T.SerEnumType):
        spec.serializable_enum.name = base.name
    elif isinstance(base, T.ErrorType):
        spec.error.SetInParent()
    elif isinstance(base, T.EnumType):
        spec.enum.name = base.name
    elif isinstance(base, T.TupleType):
        for et in base.elems:
            _type_spec(spec.tuple.members.add(), et)
    else:
        raise P4InfoError(None, f"type {t} cannot be described in P4Info")


def _assign_ids(symbols: list[Symbol]) -> None:
    used: set[int] = set()
    for s in symbols:
        if s.user_id is not None:
            pid = s.user_id
            prefix = PREFIX[s.kind] << 24
            if pid & 0xFF000000 and pid & 0xFF000000 != prefix:
                raise P4InfoError(getattr(s.decl, "loc", None), f"@id {pid:#x} of '{s.name}' has the wrong 8-bit prefix")
            pid |= prefix
            if pid in used:
                raise P4InfoError(getattr(s.decl, "loc", None), f"@id {pid:#x} is assigned to multiple declarations")
            used.add(pid)
            s.id = pid
    for kind in PREFIX:
        pending = sorted((s for s in symbols if s.kind == kind and s.user_id is None), key=lambda s: s.name.encode())
        for s in pending:
            value = jenkins_one_at_a_time(s.name)
            start = value

            def make(v: int, k: str = kind) -> int:
                return (PREFIX[k] << 24) | (v & 0xFFFFFF)
            while make(value) in used:
                value = (value + 1) & 0xFFFFFFFF
                if value == start:
                    raise P4InfoError(None, f"no id left for '{s.name}'")
            s.id = make(value)
            used.add(s.id)


def build_p4info(program: A.CheckedProgram, lowered: LoweredProgram | None = None) -> P4I.P4Info:
    """The P4Info message for ``program`` (a ``CheckedProgram`` whose main is V1Switch);
    `lowered` is its lowered form (made here when not given): the names of everything."""
    if program.main is None:
        raise P4InfoError(None, "the program has no 'main' package instance")
    if lowered is None:
        from softswitch.lowering import lower_program
        from softswitch.v1model import V1MODEL
        lowered = lower_program(program, V1MODEL)
    col = Collector(program, lowered)
    col.run()
    _assign_ids(col.symbols)
    alias = _shortest_suffixes([s.name for s in col.symbols])
    index: _Index = {(s.kind, id(s.decl)): s for s in col.symbols}
    for s in col.symbols:
        for d in s.extra.get("aliases", ()):
            index.setdefault((s.kind, id(d)), s)
        index[(s.kind, s.name)] = s
    info = P4I.P4Info()
    info.pkg_info.arch = "v1model"
    # objects in the order p4c's walk of main meets them (sub-controls inlined where
    # they are declared); digests in program order of their struct types
    position = {id(n): i for i, n in enumerate(A.iter_nodes(program.program))}
    col.symbols.sort(key=lambda s: position.get(id(s.decl), len(position)) if s.kind == "digest" else s.order)
    emit: dict[str, Callable[[P4I.P4Info, Symbol, str, _Index], None]] = {
        "table": _emit_table, "action": _emit_action, "counter": _emit_counter,
        "direct_counter": _emit_direct_counter, "meter": _emit_meter, "direct_meter": _emit_direct_meter,
        "register": _emit_register, "digest": _emit_digest, "controller_header": _emit_controller_header,
        "value_set": _emit_value_set, "action_profile": _emit_action_profile,
    }
    # tables first: they link direct resources and action profiles back to themselves
    for kind, emit_one in emit.items():
        for s in col.symbols:
            if s.kind == kind:
                emit_one(info, s, alias[s.name], index)
    if col.writes_type_info or any(s.kind != "action" for s in col.symbols):
        info.type_info.SetInParent()  # empty or not, where p4c writes it
    for st in col.struct_types.values():
        _emit_struct(info, st)
    _emit_enums(info, program)
    return info


def _emit_enums(info: P4I.P4Info, program: A.CheckedProgram) -> None:
    """type_info entries for every enum and serializable enum a type spec names (a
    digest or register of such a type), so the names resolve as P4Runtime requires."""
    wanted: dict[str, set[str]] = {"enum": set(), "serializable_enum": set(), "error": set()}

    def walk(msg: Any) -> None:
        for fd, value in msg.ListFields():
            if fd.message_type is None:
                continue
            if fd.name in wanted and fd.message_type.name != "P4TypeInfo":
                wanted[fd.name].add(getattr(value, "name", ""))
            if fd.message_type.GetOptions().map_entry:
                items = list(value.values())
            elif fd.label == fd.LABEL_REPEATED:
                items = list(value)
            else:
                items = [value]
            for item in items:
                if hasattr(item, "ListFields"):
                    walk(item)

    walk(info)
    if wanted["error"]:
        for e in program.errors:  # p4c lists every error member once one is used
            info.type_info.error.members.append(e)
    if not wanted["enum"] and not wanted["serializable_enum"]:
        return
    found: dict[str, T.P4Type] = {}
    for node in A.iter_nodes(program.program):
        t = getattr(node, "type", None)
        if isinstance(t, (T.EnumType, T.SerEnumType)):
            found.setdefault(t.name, t)
    for name in sorted(wanted["enum"]):
        t = found.get(name)
        if isinstance(t, T.EnumType):
            spec = info.type_info.enums[name]
            for m in t.members:
                spec.members.add().name = m
    for name in sorted(wanted["serializable_enum"]):
        t = found.get(name)
        if isinstance(t, T.SerEnumType):
            spec = info.type_info.serializable_enums[name]
            spec.underlying_type.bitwidth = t.underlying.width
            for m, v in t.members:
                mem = spec.members.add()
                mem.name = m
                mem.value = (v & ((1 << t.underlying.width) - 1)).to_bytes((t.underlying.width + 7) // 8, "big")


def _ctor_arg(d: A.InstantiationDecl, i: int) -> A.Expression | None:
    return d.args[i].value if i < len(d.args) else None


def _emit_table(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    t: A.TableDecl = s.decl
    low: LoweredTable = s.extra["lowered"]
    msg = info.tables.add()
    _preamble(msg.preamble, s, alias)
    for lk in low.keys:  # numbered by their place among all keys (selector keys too)
        k = lk.decl
        mf = msg.match_fields.add()
        mf.id = next(i for i, x in enumerate(t.keys, start=1) if x is k)
        mf.name = lk.name
        mf.bitwidth = _width(lk.expr.type, f"key '{mf.name}' of table '{s.name}'", k.loc)
        if lk.match_kind in _MATCH:
            mf.match_type = _MATCH[lk.match_kind]
        else:
            mf.other_match_type = lk.match_kind
        for ann in k.annotations:
            if ann.name not in _HIDDEN_ANNOTATIONS:
                mf.annotations.append(_annotation_text(ann))
    for ref, name in zip(t.actions, s.extra["actions"]):
        a = idx[("action", name)]
        ar = msg.action_refs.add()
        ar.id = a.id
        anns = ref.annotations + ref.decl.annotations
        if A.find_annotation(anns, "defaultonly"):
            ar.scope = P4I.ActionRef.DEFAULT_ONLY
        elif A.find_annotation(anns, "tableonly"):
            ar.scope = P4I.ActionRef.TABLE_ONLY
        for ann in ref.annotations:
            ar.annotations.append(_annotation_text(ann))
    implicit = s.extra.get("implicit_default")
    if t.default_action is not None:
        act = idx[("action", s.extra["default"])]
        if t.default_action_const:
            msg.const_default_action_id = act.id
        _initial_default(msg.initial_default_action, act.id, t.default_action)
    elif implicit is not None:
        # p4c's default for a table that names none: NoAction, default-only when not listed
        act = idx[("action", implicit)]
        if act.id not in [r.id for r in msg.action_refs]:
            ar = msg.action_refs.add()
            ar.id = act.id
            ar.scope = P4I.ActionRef.DEFAULT_ONLY
            ar.annotations.append("@defaultonly")
        msg.initial_default_action.action_id = act.id
    for prop in t.properties:
        if prop.name in ("counters", "meters") and isinstance(prop.value, A.PathExpression):
            kind = "direct_counter" if prop.name == "counters" else "direct_meter"
            r = idx.get((kind, id(prop.value.decl)))
            if r is not None:
                msg.direct_resource_ids.append(r.id)
                r.extra["table_id"] = s.id
        if prop.name == "implementation":
            target = prop.value.decl if isinstance(prop.value, A.PathExpression) else prop.value
            r = idx.get(("action_profile", id(target)))
            if r is not None:
                msg.implementation_id = r.id
                r.extra.setdefault("tables", []).append(s.id)
        if prop.name == "support_timeout" and prop.value.const_value is True:
            msg.idle_timeout_behavior = P4I.Table.NOTIFY_CONTROL
    msg.size = low.declared_size if low.declared_size is not None else _DEFAULT_TABLE_SIZE
    if t.entries is not None:
        msg.is_const_table = low.entries_const
        msg.has_initial_entries = True


def _initial_default(call: Any, action_id: int, ref: A.ActionRef) -> None:
    """``initial_default_action``: the action and its action-data arguments, each value
    big-endian in the parameter's full byte width."""
    call.action_id = action_id
    n = 0
    for p, a in zip(ref.params, ref.args):
        if p.direction != A.Direction.NONE:
            continue
        n += 1
        value = a.value.const_value
        width = _width(p.type_ref.type, f"parameter '{p.name}'", p.loc)
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            continue
        arg = call.arguments.add()
        arg.param_id = n
        arg.value = (value & ((1 << width) - 1)).to_bytes(max(1, (width + 7) // 8), "big")


def _emit_action(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    a: A.ActionDecl = s.decl
    msg = info.actions.add()
    _preamble(msg.preamble, s, alias)
    n = 0
    for p in a.params:
        if p.direction != A.Direction.NONE or s.extra.get("from_apply"):
            # directional parameters are bound where the action is used; an action
            # called from an apply block has all its parameters bound there
            continue
        n += 1
        prm = msg.params.add()
        prm.id = n
        prm.name = p.name
        prm.bitwidth = _width(p.type_ref.type, f"parameter '{p.name}' of action '{s.name}'", p.loc)
        for ann in p.annotations:
            if ann.name not in _HIDDEN_ANNOTATIONS:
                prm.annotations.append(_annotation_text(ann))


def _enum_member(e: A.Expression | None) -> str | None:
    return e.member if isinstance(e, A.MemberExpression) else None


def _emit_counter(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    msg = info.counters.add()
    _preamble(msg.preamble, s, alias)
    msg.spec.unit = _COUNTER_UNIT.get(_enum_member(_ctor_arg(s.decl, 1)) or "", P4I.CounterSpec.UNSPECIFIED)
    size = _ctor_arg(s.decl, 0)
    msg.size = int(size.const_value) if size is not None and size.const_value is not None else 0


def _emit_direct_counter(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    msg = info.direct_counters.add()
    _preamble(msg.preamble, s, alias)
    msg.spec.unit = _COUNTER_UNIT.get(_enum_member(_ctor_arg(s.decl, 0)) or "", P4I.CounterSpec.UNSPECIFIED)
    if "table_id" in s.extra:
        msg.direct_table_id = s.extra["table_id"]


def _emit_meter(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    msg = info.meters.add()
    _preamble(msg.preamble, s, alias)
    msg.spec.unit = _METER_UNIT.get(_enum_member(_ctor_arg(s.decl, 1)) or "", P4I.MeterSpec.UNSPECIFIED)
    size = _ctor_arg(s.decl, 0)
    msg.size = int(size.const_value) if size is not None and size.const_value is not None else 0


def _emit_direct_meter(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    msg = info.direct_meters.add()
    _preamble(msg.preamble, s, alias)
    msg.spec.unit = _METER_UNIT.get(_enum_member(_ctor_arg(s.decl, 0)) or "", P4I.MeterSpec.UNSPECIFIED)
    if "table_id" in s.extra:
        msg.direct_table_id = s.extra["table_id"]


def _emit_register(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    d: A.InstantiationDecl = s.decl
    msg = info.registers.add()
    _preamble(msg.preamble, s, alias)
    t = d.type_bindings.get("T")
    if t is not None:
        _type_spec(msg.type_spec, t)
    size = _ctor_arg(d, 0)
    msg.size = int(size.const_value) if size is not None and size.const_value is not None else 0


def _emit_digest(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    msg = info.digests.add()
    _preamble(msg.preamble, s, alias)
    _type_spec(msg.type_spec, s.extra["type"])


def _emit_struct(info: P4I.P4Info, st: T.StructLikeType) -> None:
    target = info.type_info.headers if isinstance(st, T.HeaderType) else info.type_info.structs
    spec = target[st.name]
    for fname, ft in st.fields:
        if isinstance(st, T.HeaderType) and isinstance(T.strip_newtype(ft), T.StructType):
            # P4Runtime's header members are bit strings only
            raise P4InfoError(None, f"header '{st.name}' field '{fname}' is a struct, which P4Info "
                                    "cannot describe in a header type")
        mem = spec.members.add()
        mem.name = fname
        if isinstance(st, T.HeaderType):
            _bitstring_spec(mem.type_spec, ft)
        else:
            _type_spec(mem.type_spec, ft)


def _bitstring_spec(spec: Any, t: T.P4Type) -> None:
    """A header member's P4BitstringLikeTypeSpec (bit, int or varbit; a bool is one bit
    and a serializable enum its underlying type, as they are on the wire)."""
    base = T.strip_newtype(t)
    if isinstance(base, T.SerEnumType):
        base = base.underlying
    if isinstance(base, T.BoolType):
        spec.bit.bitwidth = 1
    elif isinstance(base, T.BitsType):
        (spec.int if base.signed else spec.bit).bitwidth = base.width
    elif isinstance(base, T.VarbitType):
        spec.varbit.max_bitwidth = base.max_width
    else:
        raise P4InfoError(None, f"header member of type {t} cannot be described in P4Info")


def _emit_controller_header(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    d: A.HeaderDecl = s.decl
    msg = info.controller_packet_metadata.add()
    _preamble(msg.preamble, s, alias)
    for i, f in enumerate(d.fields, start=1):
        md = msg.metadata.add()
        md.id = i
        md.name = f.name
        md.bitwidth = _width(f.type_ref.type, f"field '{f.name}' of controller header '{d.name}'", f.loc)
        for ann in f.annotations:
            if ann.name not in _HIDDEN_ANNOTATIONS:
                md.annotations.append(_annotation_text(ann))


def _emit_value_set(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    d: A.ValueSetDecl = s.decl
    msg = info.value_sets.add()
    _preamble(msg.preamble, s, alias)
    et = d.elem_type.type
    assert et is not None
    fields = et.fields if isinstance(et, T.StructType) else (("", et),)
    for i, (fname, ft) in enumerate(fields, start=1):
        mf = msg.match.add()
        mf.id = i
        if fname:
            mf.name = fname
        mf.bitwidth = _width(ft, f"value set '{s.name}'", d.loc)
        mf.match_type = P4I.MatchField.EXACT
    msg.size = int(d.size.const_value or 0)


def _emit_action_profile(info: P4I.P4Info, s: Symbol, alias: str, idx: _Index) -> None:
    msg = info.action_profiles.add()
    _preamble(msg.preamble, s, alias)
    d = s.decl
    tname = getattr(getattr(d, "type_decl", None), "name", None)
    args = d.args if isinstance(d, (A.InstantiationDecl, A.MethodCallExpression)) else []
    if isinstance(d, A.MethodCallExpression):
        tname = getattr(d.callee_decl, "name", None)
    msg.with_selector = tname == "action_selector"
    size_arg = args[1].value if msg.with_selector and len(args) > 1 else (args[0].value if args else None)
    msg.size = int(size_arg.const_value) if size_arg is not None and size_arg.const_value is not None else 0
    msg.table_ids.extend(s.extra.get("tables", []))


_TEXT_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"


def format_p4info(info: P4I.P4Info) -> str:
    """Protobuf text format, as written by p4c ``--p4runtime-files x.txtpb`` (with the
    same two comment lines naming the schema)."""
    return _TEXT_HEADER + text_format.MessageToString(info)


def write_p4info(info: P4I.P4Info, path: str) -> None:
    """Write text format (``.txt``/``.txtpb``), binary (``.bin``) or JSON (``.json``)."""
    if path.endswith(".bin"):
        data: bytes | str = info.SerializeToString()
        with open(path, "wb") as fh:
            fh.write(data)  # type: ignore[arg-type]
        return
    if path.endswith(".json"):
        from google.protobuf import json_format

        text = json_format.MessageToJson(info)
    else:
        text = format_p4info(info)
    with open(path, "w") as fh:
        fh.write(text)
