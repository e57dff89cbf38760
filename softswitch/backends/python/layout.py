"""Python classes for P4 headers, structs, unions and header stacks.

Why generated classes: field access on a ``__slots__`` instance is the fastest
mutable record Python has, and generating ``_extract``/``_emit``/``_copy``/
``_set`` per header type from its field list gives straight-line code with
constant shifts and masks (no loop over fields at run time).

Field names are mangled only where Python needs it (keywords, leading
underscore): see `attr_name`.
"""
from __future__ import annotations

import keyword
from typing import Any

from softswitch.errors import CompileError, PacketTooShort, StackOutOfBounds, VarbitLengthError
from softswitch.frontend import types as T
from softswitch.packet import PacketReader


def strip(t: T.P4Type | None) -> T.P4Type | None:
    """The representation type of `t` (``type`` declarations resolved), None stays None."""
    return None if t is None else T.strip_newtype(t)


def attr_name(name: str) -> str:
    """Python attribute name for a P4 field name."""
    if keyword.iskeyword(name) or name.startswith("_") or name in ("copy",):
        return "f_" + name
    return name


def default_value(t: T.P4Type | None) -> Any:
    """Initial value of a scalar of type `t` (0, False, the first enum member)."""
    t = strip(t)
    if isinstance(t, T.BoolType):
        return False
    if isinstance(t, T.EnumType):
        return 0  # plain enum members are their positions (as the checker folds them)
    return 0


class HeaderStack:
    """A header stack: fixed list of header objects plus ``nextIndex`` (P4 spec 8.18)."""

    __slots__ = ("_cls", "elems", "next_index", "size")

    def __init__(self, cls: type, size: int) -> None:
        self._cls = cls
        self.size = size
        self.elems = [cls() for _ in range(size)]
        self.next_index = 0

    def at(self, i: int) -> Any:
        """Element `i` for a run-time index.  Out of range, a fresh invalid element: a
        read sees an invalid header with zero fields, a write changes nothing (what p4c
        makes of a run-time index for BMv2: a chain of compares, none of which holds)."""
        if not 0 <= i < self.size:
            return self._cls()
        return self.elems[i]

    def next(self) -> Any:
        if self.next_index >= self.size:
            raise StackOutOfBounds(f"header stack of {self.size}: .next is out of bounds")
        return self.elems[self.next_index]

    def last(self) -> Any:
        if self.next_index == 0:
            raise StackOutOfBounds(f"header stack of {self.size}: .last with no element")
        return self.elems[self.next_index - 1]

    def last_index(self) -> int:
        return self.next_index - 1

    def push_front(self, n: int) -> None:
        n = min(n, self.size)
        old = self.elems
        fresh = [self._cls() for _ in range(n)]
        self.elems = fresh + old[: self.size - n]
        self.next_index = min(self.next_index + n, self.size)

    def pop_front(self, n: int) -> None:
        n = min(n, self.size)
        fresh = [self._cls() for _ in range(n)]
        self.elems = self.elems[n:] + fresh
        self.next_index = max(self.next_index - n, 0)

    def _copy(self) -> HeaderStack:
        new = HeaderStack.__new__(HeaderStack)
        new._cls = self._cls
        new.size = self.size
        new.elems = [e._copy() for e in self.elems]
        new.next_index = self.next_index
        return new

    def _set(self, other: HeaderStack) -> None:
        self.elems = [e._copy() for e in other.elems]
        self.next_index = other.next_index

    def _emit(self, w: Any) -> None:
        for e in self.elems:
            e._emit(w)

    def _invalidate(self) -> None:
        for e in self.elems:
            e._valid = False
        self.next_index = 0

    def _eq(self, other: HeaderStack) -> bool:
        """Stacks are equal when every element is (validity and fields), as P4 defines it."""
        return self.size == other.size and all(a._eq(b) for a, b in zip(self.elems, other.elems))

    def _fields(self) -> dict[str, Any]:
        return {str(i): e._fields() for i, e in enumerate(self.elems)}

    def __repr__(self) -> str:
        return f"stack{[e for e in self.elems]}"


class TypeLayouts:
    """Builds and caches one Python class per struct-like P4 type."""

    def __init__(self) -> None:
        self.classes: dict[T.P4Type, type] = {}
        self.env: dict[str, Any] = {"PacketTooShort": PacketTooShort,
                                    "VarbitLengthError": VarbitLengthError, "HeaderStack": HeaderStack,
                                    "PacketReader": PacketReader}

    def class_for(self, t: T.P4Type | None) -> type:
        t = strip(t)
        if t is None:
            raise CompileError("value without a type")
        cls = self.classes.get(t)
        if cls is None:
            if isinstance(t, T.HeaderType):
                cls = self._header_class(t)
            elif isinstance(t, T.HeaderUnionType):
                cls = self._struct_class(t, union=True)
            elif isinstance(t, T.StructType):
                cls = self._struct_class(t, union=False)
            else:
                raise CompileError(f"type {t}: not a header, struct or union")
            self.classes[t] = cls
        return cls

    def new_value_src(self, t: T.P4Type | None) -> str:
        """Python expression creating a fresh value of type `t` (for locals)."""
        t = strip(t)
        if isinstance(t, T.StackType):
            return f"HeaderStack({self.class_ref(t.elem)}, {t.size})"
        if isinstance(t, T.StructLikeType):
            return f"{self.class_ref(t)}()"
        if isinstance(t, T.TupleType):
            return "(" + "".join(f"{self.new_value_src(e)}, " for e in t.elems) + ")"
        return repr(default_value(t))

    def class_ref(self, t: T.P4Type | None) -> str:
        cls = self.class_for(t)
        name = cls.__name__
        self.env[name] = cls
        return name

    # ----------------------------------------------------------------- builders
    def _exec(self, src: str, name: str) -> type:
        env = self.env
        exec(compile(src, f"<p4 type {name}>", "exec"), env)  # noqa: S102 - generated code is the design
        return env[name]

    def _header_class(self, t: T.HeaderType) -> type:
        cname = f"H_{t.name}_{len(self.classes)}"
        names = [attr_name(f) for f, _ in t.fields]
        # a field of struct type (P4_16 allows structs of bit<W>/int<W>/bool/enums in
        # headers) is a nested struct object; its leaves are serialised in order, so
        # extract/emit work on the leaf paths (`row.e`) and the rest on the objects
        nested = {attr_name(f) for f, ft in t.fields if isinstance(T.strip_newtype(ft), T.StructType)}
        leaves: list[tuple[str, T.P4Type]] = []

        def flatten(path: str, ft: T.P4Type) -> None:
            base = T.strip_newtype(ft)
            if isinstance(base, T.StructType):
                for sf, sft in base.fields:
                    flatten(f"{path}.{attr_name(sf)}", sft)
            else:
                leaves.append((path, base))

        for f, ft in t.fields:
            flatten(attr_name(f), ft)
        top_names = names
        names = [p for p, _ in leaves]
        ftypes = [ft for _, ft in leaves]
        varbit = [i for i, ft in enumerate(ftypes) if isinstance(ft, T.VarbitType)]
        widths = []
        for (fname, ft) in zip(names, ftypes):
            if isinstance(ft, T.VarbitType):
                widths.append(0)
            else:
                try:
                    widths.append(T.bit_width(ft))
                except ValueError as exc:
                    raise CompileError(f"header {t.name}: field {fname} of type {ft} has no width") from exc
        signed = [isinstance(ft, T.BitsType) and ft.signed for ft in ftypes]
        booleans = [isinstance(ft, T.BoolType) for ft in ftypes]
        slots = ["_valid"] + top_names + [f"_vw_{names[i]}" for i in varbit]
        total = sum(widths)
        lines = [f"class {cname}:", f"    __slots__ = {tuple(slots)!r}", f"    _p4name = {t.name!r}",
                 f"    _field_names = {tuple(top_names)!r}", f"    _widths = {tuple(widths)!r}",
                 f"    _bits = {total}", "    _is_header = True",
                 "    def __init__(self):", "        self._valid = False"]
        for f, ft in t.fields:
            n = attr_name(f)
            if n in nested:
                lines.append(f"        self.{n} = {self.class_ref(T.strip_newtype(ft))}()")
            else:
                lines.append(f"        self.{n} = {False if isinstance(T.strip_newtype(ft), T.BoolType) else 0}")
        for i in varbit:
            lines.append(f"        self._vw_{names[i]} = 0")
        # field values from the big integer v

        def field_from_v(i: int, shift: int) -> str:
            w = widths[i]
            expr = f"(v >> {shift}) & {(1 << w) - 1}" if shift else f"v & {(1 << w) - 1}"
            if signed[i]:
                half = 1 << (w - 1)
                expr = f"((({expr}) ^ {half}) - {half})"
            if booleans[i]:
                expr = f"bool({expr})"
            return expr

        def pack_expr() -> str:
            terms = []
            shift = total
            for i, n in enumerate(names):
                w = widths[i]
                shift -= w
                val = f"self.{n}"
                if signed[i] or booleans[i]:
                    val = f"({val} & {(1 << w) - 1})" if signed[i] else f"int({val})"
                terms.append(f"({val} << {shift})" if shift else val)
            return " | ".join(terms) or "0"

        if not varbit:
            lines += ["    def _extract(self, r):",
                      "        p = r.bitpos",
                      f"        e = p + {total}",
                      "        if e > r.nbits:",
                      f"            raise PacketTooShort('extract {t.name}: need {total} bits at bit ' + str(p) + ', ' + str(r.nbits - p) + ' left')",
                      "        if not p & 7:",
                      "            v = int.from_bytes(r.data[p >> 3:(e + 7) >> 3], 'big')"
                      + (f" >> {(-total) & 7}" if total % 8 else ""),
                      "        else:",
                      f"            v = r.peek({total})",
                      "        r.bitpos = e"]
            shift = total
            for i, n in enumerate(names):
                shift -= widths[i]
                lines.append(f"        self.{n} = {field_from_v(i, shift)}")
            lines.append("        self._valid = True")
            lines += ["    def _emit(self, w):",
                      "        if self._valid:",
                      f"            w.acc = (w.acc << {total}) | {pack_expr()}",
                      f"            w.nbits += {total}"]
            lines += ["    def _pack(self):", f"        return {pack_expr()}"]
        else:
            vb = varbit[0]
            if len(varbit) > 1:
                raise CompileError(f"header {t.name}: more than one varbit field")
            vb_type = ftypes[vb]
            assert isinstance(vb_type, T.VarbitType)
            # BMv2's order of checks: whole bytes, then the maximum, then the data left
            lines += ["    def _extract(self, r, vbits=0):",
                      "        if vbits & 7:",
                      f"            raise VarbitLengthError('ParserInvalidArgument', 'extract {t.name}: varbit length ' + str(vbits) + ' is not a multiple of 8')",
                      f"        if vbits < 0 or vbits > {vb_type.max_width}:",
                      f"            raise VarbitLengthError('HeaderTooShort', 'extract {t.name}: varbit length ' + str(vbits) + ' is over the maximum {vb_type.max_width}')",
                      f"        if r.bitpos + {total} + vbits > r.nbits:",
                      f"            raise PacketTooShort('extract {t.name}: packet too short')"]
            for i, n in enumerate(names):
                if i == vb:
                    lines.append(f"        self.{n} = r.take(vbits)")
                    lines.append(f"        self._vw_{n} = vbits")
                else:
                    conv = f"r.take({widths[i]})"
                    if signed[i]:
                        half = 1 << (widths[i] - 1)
                        conv = f"(({conv}) ^ {half}) - {half}"
                    if booleans[i]:
                        conv = f"bool({conv})"
                    lines.append(f"        self.{n} = {conv}")
            lines.append("        self._valid = True")
            lines += ["    def _emit(self, w):", "        if self._valid:"]
            for i, n in enumerate(names):
                if i == vb:
                    lines.append(f"            w.put(self.{n}, self._vw_{n})")
                else:
                    val = f"self.{n}"
                    if signed[i]:
                        val = f"({val} & {(1 << widths[i]) - 1})"
                    elif booleans[i]:
                        val = f"int({val})"
                    lines.append(f"            w.put({val}, {widths[i]})")
        copy_assigns = "; ".join(f"n.{s} = self.{s}._copy()" if s in nested else f"n.{s} = self.{s}"
                                 for s in slots)
        set_assigns = "; ".join(f"self.{s}._set(o.{s})" if s in nested else f"self.{s} = o.{s}"
                                for s in slots)
        lines += ["    def _copy(self):", f"        n = {cname}.__new__({cname}); {copy_assigns}; return n",
                  "    def _set(self, o):", f"        {set_assigns}",
                  "    def _set_fields(self, *vals):"]
        if nested:
            for i, n in enumerate(top_names):
                if n in nested:
                    lines.append(f"        v = vals[{i}]")
                    lines.append(f"        self.{n}._set_fields(*v) if type(v) is tuple else self.{n}._set(v)")
                else:
                    lines.append(f"        self.{n} = vals[{i}]")
        elif top_names:
            lines.append(f"        ({', '.join('self.' + n for n in top_names)}{',' if len(top_names) == 1 else ''}) = vals")
        else:
            lines.append("        pass")
        eq_terms = [f"self.{n}._eq(o.{n})" if n in nested else f"self.{n} == o.{n}" for n in top_names]
        eq_terms += [f"self._vw_{names[i]} == o._vw_{names[i]}" for i in varbit]
        lines += ["        self._valid = True",
                  "    def _invalidate(self):",
                  "        self._valid = False",
                  "    def _eq(self, o):",
                  f"        return self._valid == o._valid and (not self._valid or ({' and '.join(eq_terms) or 'True'}))",
                  "    def _fields(self):",
                  "        return {" + ", ".join(f"{n!r}: self.{n}._fields()" if n in nested else f"{n!r}: self.{n}"
                                            for n in top_names) + "}",
                  "    def __repr__(self):",
                  f"        return '{t.name}(' + ('' if self._valid else 'invalid, ') + ', '.join(k + '=' + hex(v) if type(v) is int else k + '=' + repr(v) for k, v in self._fields().items()) + ')'",
                  ]
        return self._exec("\n".join(lines) + "\n", cname)

    def _struct_class(self, t: T.StructLikeType, *, union: bool) -> type:
        cname = f"S_{t.name}_{len(self.classes)}"
        names = [attr_name(f) for f, _ in t.fields]
        inits = []
        copies = []
        sets = []
        objs = []
        for n, (_, field_t) in zip(names, t.fields):
            ft = T.strip_newtype(field_t)
            if isinstance(ft, (T.StructLikeType, T.StackType)):
                inits.append(f"self.{n} = {self.new_value_src(ft)}")
                copies.append(f"n.{n} = self.{n}._copy()")
                sets.append(f"self.{n}._set(o.{n})")
                objs.append(n)
            else:
                inits.append(f"self.{n} = {default_value(ft)!r}")
                copies.append(f"n.{n} = self.{n}")
                sets.append(f"self.{n} = o.{n}")
        lines = [f"class {cname}:", f"    __slots__ = {tuple(names)!r}", f"    _p4name = {t.name!r}",
                 f"    _field_names = {tuple(names)!r}", "    _is_header = False",
                 f"    _is_union = {union}",
                 "    def __init__(self):"] + [f"        {x}" for x in inits or ["pass"]]
        lines += ["    def _copy(self):", f"        n = {cname}.__new__({cname})"]
        lines += [f"        {x}" for x in copies] + ["        return n"]
        lines += ["    def _set(self, o):"] + [f"        {x}" for x in sets or ["pass"]]
        lines += ["    def _set_fields(self, *vals):"]
        if names:
            lines.append("        vals = list(vals)")
            for i, n in enumerate(names):
                if n in objs:
                    lines.append(f"        v = vals[{i}]")
                    lines.append(f"        self.{n}._set_fields(*v) if type(v) is tuple else self.{n}._set(v)")
                else:
                    lines.append(f"        self.{n} = vals[{i}]")
        else:
            lines.append("        pass")
        lines += ["    def _emit(self, w):"]
        emit_lines = [f"        self.{n}._emit(w)" for n in objs]
        lines += emit_lines or ["        pass"]
        lines += ["    def _invalidate(self):"]
        lines += [f"        self.{n}._invalidate()" for n in objs] or ["        pass"]
        if union:
            lines += ["    def _is_valid(self):",
                      f"        return {' or '.join(f'self.{n}._valid' for n in names) or 'False'}",
                      "    def _only_valid(self, keep):"]
            lines += [f"        if keep != {n!r}: self.{n}._valid = False" for n in names] or ["        pass"]
        lines += ["    def _eq(self, o):",
                  "        return " + (" and ".join(
                      f"self.{n}._eq(o.{n})" if n in objs else f"self.{n} == o.{n}" for n in names) or "True"),
                  "    def _fields(self):",
                  "        return {" + ", ".join(
                      f"{n!r}: self.{n}._fields()" if n in objs else f"{n!r}: self.{n}" for n in names) + "}",
                  "    def __repr__(self):",
                  f"        return '{t.name}' + repr(self._fields())"]
        return self._exec("\n".join(lines) + "\n", cname)
