"""Type references -> resolved types; implicit conversions; type-variable binding.

Why here and not in the expression checker: the same three operations (resolve a
written type, coerce an expression to a type, bind generic parameters) are needed by
declarations, statements, calls and tables alike.
"""
from __future__ import annotations

from typing import Any

from . import ast as A
from . import types as T
from .constfold import wrap
from .errors import P4Error, P4NameError, P4TypeError, P4Unsupported
from .scope import Scope


class TypeResolver:
    """Shared state of one checking run: caches and the program-wide enumerations."""

    def __init__(self) -> None:
        self.type_cache: dict[int, T.P4Type] = {}
        self.error_members: list[A.EnumMember] = []
        self.match_kind_members: list[A.EnumMember] = []
        self.top: Scope = Scope(kind="top")

    # ------------------------------------------------------------ constants
    def const_int(self, e: A.Expression, scope: Scope, what: str) -> int:
        """Fold ``e`` to a compile-time integer or fail naming ``what``."""
        self.check_expr(e, scope)  # type: ignore[attr-defined]
        if not isinstance(e.const_value, int) or isinstance(e.const_value, bool):
            raise P4TypeError(e.loc, f"{what} must be a compile-time constant integer")
        return e.const_value

    # ------------------------------------------------------------ type references
    def error_type(self) -> T.ErrorType:
        return T.ErrorType()  # members live in CheckedProgram.errors (declarations merge)

    def match_kind_type(self) -> T.MatchKindType:
        return T.MatchKindType()

    def resolve(self, tref: A.TypeRef, scope: Scope, tparams: frozenset[str] = frozenset()) -> T.P4Type:
        t = self._resolve(tref, scope, tparams)
        tref.type = t
        return t

    def _resolve(self, tref: A.TypeRef, scope: Scope, tparams: frozenset[str]) -> T.P4Type:
        if isinstance(tref, A.BitTypeRef):
            if tref.width is None:
                return T.BitsType(1, False)
            w = self.const_int(tref.width, scope, "bit width")
            if w <= 0 and not (w == 0 and not tref.signed):
                raise P4TypeError(tref.loc, f"invalid width {w} for {'int' if tref.signed else 'bit'}<>")
            return T.BitsType(w, tref.signed)
        if isinstance(tref, A.VarbitTypeRef):
            w = self.const_int(tref.width, scope, "varbit width")
            if w <= 0:
                raise P4TypeError(tref.loc, f"invalid width {w} for varbit<>")
            return T.VarbitType(w)
        if isinstance(tref, A.BaseTypeRef):
            simple = {"bool": T.BOOL, "int": T.INT, "string": T.STRING, "void": T.VOID, "_": T.DONT_CARE}
            if tref.name in simple:
                return simple[tref.name]
            if tref.name == "error":
                return self.error_type()
            if tref.name == "match_kind":
                return self.match_kind_type()
            raise P4Unsupported(tref.loc, f"type '{tref.name}'")
        if isinstance(tref, A.NamedTypeRef):
            if tref.name in tparams and not tref.dot_prefix:
                return T.TypeVar(tref.name)
            decl = (self.top if tref.dot_prefix else scope).lookup(tref.name)
            if decl is None:
                raise P4NameError(tref.loc, f"undeclared type '{tref.name}'{scope.suggest(tref.name)}")
            tref.decl = decl
            return self.decl_type(decl, (), tref.loc)
        if isinstance(tref, A.SpecializedTypeRef):
            args = tuple(self.resolve(a, scope, tparams) for a in tref.args)
            decl = scope.lookup(tref.base.name)
            if decl is None:
                raise P4NameError(tref.loc, f"undeclared type '{tref.base.name}'{scope.suggest(tref.base.name)}")
            tref.base.decl = decl
            want = len(getattr(decl, "type_params", []) or [])
            if want != len(args):
                raise P4TypeError(tref.loc, f"type '{tref.base.name}' takes {want} type argument(s), got {len(args)}")
            t = self.decl_type(decl, args, tref.loc)
            tref.base.type = t
            return t
        if isinstance(tref, A.StackTypeRef):
            elem = self.resolve(tref.elem, scope, tparams)
            size = self.const_int(tref.size, scope, "header stack size")
            if not isinstance(elem, (T.HeaderType, T.HeaderUnionType)):
                raise P4TypeError(tref.loc, f"header stack element must be a header or header union, not {elem}")
            if size <= 0:
                raise P4TypeError(tref.size.loc, f"header stack size must be positive, got {size}")
            return T.StackType(elem, size)
        if isinstance(tref, A.TupleTypeRef):
            return T.TupleType(tuple(self.resolve(a, scope, tparams) for a in tref.elems))
        raise P4Unsupported(tref.loc, f"type reference {type(tref).__name__}")

    def decl_type(self, decl: Any, args: tuple[T.P4Type, ...], loc: A.SourceLoc) -> T.P4Type:
        """The type a declaration names (headers/structs/enums cached per declaration)."""
        if isinstance(decl, (A.HeaderDecl, A.HeaderUnionDecl, A.StructDecl, A.EnumDecl, A.TypedefDecl)):
            cached = self.type_cache.get(id(decl))
            if cached is None:
                raise P4TypeError(loc, f"type '{decl.name}' used before its declaration is complete")
            return cached
        if isinstance(decl, A.ExternDecl):
            return T.ExternType(decl.name, args)
        if isinstance(decl, (A.ParserTypeDecl, A.ParserDecl)):
            return T.ParserType(decl.name, args)
        if isinstance(decl, (A.ControlTypeDecl, A.ControlDecl)):
            return T.ControlType(decl.name, args)
        if isinstance(decl, A.PackageTypeDecl):
            return T.PackageType(decl.name, args)
        if isinstance(decl, A.ErrorDecl):
            return self.error_type()
        if isinstance(decl, A.MatchKindDecl):
            return self.match_kind_type()
        raise P4TypeError(loc, f"'{decl.name}' is not a type")

    def declare_type(self, decl: A.Declaration, scope: Scope) -> T.P4Type:
        """Compute and cache the type of a header/struct/union/enum/typedef declaration."""
        if isinstance(decl, (A.HeaderDecl, A.HeaderUnionDecl, A.StructDecl)):
            fields: list[tuple[str, T.P4Type]] = []
            seen: set[str] = set()
            for f in decl.fields:
                if f.name in seen:
                    raise P4NameError(f.loc, f"field '{f.name}' declared twice in '{decl.name}'")
                seen.add(f.name)
                ft = self.resolve(f.type_ref, scope)
                self._check_field_type(decl, f, ft)
                fields.append((f.name, ft))
            cls = {A.HeaderDecl: T.HeaderType, A.HeaderUnionDecl: T.HeaderUnionType, A.StructDecl: T.StructType}
            t: T.P4Type = cls[type(decl)](decl.name, tuple(fields))
        elif isinstance(decl, A.EnumDecl):
            if decl.underlying is None:
                for i, m in enumerate(decl.members):
                    m.int_value = i
                t = T.EnumType(decl.name, tuple(m.name for m in decl.members))
            else:
                under = T.strip_newtype(self.resolve(decl.underlying, scope))
                if not isinstance(under, T.BitsType):
                    raise P4TypeError(decl.underlying.loc, f"enum '{decl.name}' needs a bit<W> or int<W> underlying type, not {under}")
                vals = []
                for m in decl.members:
                    assert m.value is not None
                    v = self.const_int(m.value, scope, f"value of enum member '{decl.name}.{m.name}'")
                    m.value.type = under
                    m.int_value = wrap(v, under)
                    m.value.const_value = m.int_value
                    vals.append((m.name, m.int_value))
                t = T.SerEnumType(decl.name, under, tuple(vals))
        elif isinstance(decl, A.TypedefDecl):
            under = self.resolve(decl.type_ref, scope)
            t = T.NewType(decl.name, under) if decl.is_newtype else under
        else:  # pragma: no cover
            raise P4TypeError(decl.loc, f"'{decl.name}' is not a type declaration")
        self.type_cache[id(decl)] = t
        return t

    @staticmethod
    def _check_field_type(decl: A.Declaration, f: A.StructField, ft: T.P4Type) -> None:
        base = T.strip_newtype(ft)

        def fixed_struct(st: T.P4Type) -> bool:
            """A struct of bit<W>, int<W>, bool, serializable enums or such structs,
            which P4_16 lets a header hold (serialised field by field)."""
            st = T.strip_newtype(st)
            if isinstance(st, T.StructType):
                return all(fixed_struct(x) for _, x in st.fields)
            return isinstance(st, (T.BitsType, T.SerEnumType, T.BoolType))

        if isinstance(decl, A.HeaderDecl) and \
                not isinstance(base, (T.BitsType, T.VarbitType, T.SerEnumType, T.BoolType)) \
                and not (isinstance(base, T.StructType) and fixed_struct(base)):
                raise P4TypeError(f.loc, f"header field '{decl.name}.{f.name}' has type {ft}; headers hold only bit<W>, int<W>, varbit<W>, bool, serializable enums or structs of those")
        if isinstance(decl, A.HeaderUnionDecl) and not isinstance(base, T.HeaderType):
            raise P4TypeError(f.loc, f"header union field '{decl.name}.{f.name}' must be a header, not {ft}")

    # ------------------------------------------------------------ generics
    def subst(self, t: T.P4Type, b: dict[str, T.P4Type]) -> T.P4Type:
        if isinstance(t, T.TypeVar):
            return b.get(t.name, t)
        if isinstance(t, T.StackType):
            return T.StackType(self.subst(t.elem, b), t.size)
        if isinstance(t, T.TupleType):
            return T.TupleType(tuple(self.subst(e, b) for e in t.elems))
        if isinstance(t, (T.ExternType, T.ParserType, T.ControlType, T.PackageType)):
            return type(t)(t.name, tuple(self.subst(a, b) for a in t.args))
        return t

    @staticmethod
    def has_typevar(t: T.P4Type) -> bool:
        if isinstance(t, T.TypeVar):
            return True
        if isinstance(t, T.StackType):
            return TypeResolver.has_typevar(t.elem)
        if isinstance(t, T.TupleType):
            return any(TypeResolver.has_typevar(e) for e in t.elems)
        if isinstance(t, (T.ExternType, T.ParserType, T.ControlType, T.PackageType)):
            return any(TypeResolver.has_typevar(a) for a in t.args)
        return False

    def unify(self, want: T.P4Type, got: T.P4Type, b: dict[str, T.P4Type]) -> bool:
        """Bind type variables in ``want`` so it matches ``got``; False if impossible."""
        if isinstance(want, T.TypeVar):
            if isinstance(got, (T.IntType, T.DontCareType)):
                return True  # decided later from other arguments
            if want.name in b:
                return True  # already bound (explicitly or earlier): coerce() checks the value
            b[want.name] = got
            return True
        if isinstance(want, T.TupleType) and isinstance(got, T.TupleType):
            return len(want.elems) == len(got.elems) and all(
                self.unify(w, g, b) for w, g in zip(want.elems, got.elems))
        if isinstance(want, (T.ExternType, T.ParserType, T.ControlType, T.PackageType)) and \
                isinstance(got, type(want)):
            return want.name == got.name and len(want.args) == len(got.args) and all(
                self.unify(w, g, b) for w, g in zip(want.args, got.args))
        return True

    # ------------------------------------------------------------ implicit conversions
    def coerce(self, e: A.Expression, target: T.P4Type, what: str) -> None:
        """Make ``e`` (already checked) usable where ``target`` is expected, or fail.

        Unsized integers take the target's width (value wrapped); ``{...}`` lists and
        ``{f = ...}`` initialisers take a struct/header/tuple type; a serializable enum
        converts to its underlying type.  Everything else must match exactly.
        """
        got = e.type
        assert got is not None
        if got == target or isinstance(target, (T.DontCareType, T.TypeVar)) or isinstance(got, T.DontCareType):
            return
        base = T.strip_newtype(target)
        if isinstance(got, T.IntType) and isinstance(base, (T.BitsType, T.IntType)):
            self._retype_int(e, target, base)
            return
        if isinstance(got, T.IntType) and isinstance(base, T.SerEnumType):
            raise P4TypeError(e.loc, f"{what}: cannot use an integer where enum {target} is expected; use a member or a cast")
        if isinstance(e, A.ListExpression) and isinstance(base, (T.StructType, T.HeaderType, T.TupleType)):
            elem_types = base.elems if isinstance(base, T.TupleType) else tuple(ft for _, ft in base.fields)
            if len(elem_types) != len(e.elems):
                raise P4TypeError(e.loc, f"{what}: {target} has {len(elem_types)} field(s), the list has {len(e.elems)}")
            for sub, st in zip(e.elems, elem_types):
                self.coerce(sub, st, what)
            e.type = target
            return
        if isinstance(e, A.StructExpression) and isinstance(base, (T.StructType, T.HeaderType)):
            names = base.field_names()
            given = [f.name for f in e.fields]
            if sorted(names) != sorted(given):
                missing = [n for n in names if n not in given]
                extra = [n for n in given if n not in names]
                detail = f"missing {missing}" if missing else f"unknown {extra}"
                raise P4TypeError(e.loc, f"{what}: initialiser does not match {target}: {detail}")
            for f in e.fields:
                ft = base.field_type(f.name)
                assert ft is not None
                self.coerce(f.value, ft, what)
            e.type = target
            return
        if isinstance(got, (T.ParserType, T.ControlType)) and isinstance(base, type(got)) \
                and self._block_fits(got.name, base.name):
            return
        if isinstance(got, T.SerEnumType) and base == got.underlying:
            return
        if isinstance(e, A.TernaryExpression):
            self.coerce(e.then, target, what)
            self.coerce(e.else_, target, what)
            e.type = target
            return
        if isinstance(got, T.BitsType) and isinstance(base, T.BitsType) and got.signed == base.signed \
                and got.width != base.width:
            raise P4TypeError(e.loc, f"{what}: width mismatch: expected {target}, got {got}")
        raise P4TypeError(e.loc, f"{what}: type mismatch: expected {target}, got {got}")

    def _block_fits(self, have: str, want: str) -> bool:
        """A parser/control instance passed where a parser/control type is expected
        (a constructor argument): its apply parameters must match in number, direction
        and type (the type's generic parameters match anything)."""
        blk, typ = self.top.lookup(have), self.top.lookup(want)
        if not isinstance(blk, (A.ParserDecl, A.ControlDecl)) or \
                not isinstance(typ, (A.ParserTypeDecl, A.ControlTypeDecl)) or \
                len(blk.params) != len(typ.params):
            return False
        tps = frozenset(typ.type_params)
        for bp, wp in zip(blk.params, typ.params):
            wt = wp.type_ref.type or self.resolve(wp.type_ref, self.top, tps)
            if bp.direction != wp.direction:
                return False
            if not isinstance(wt, T.TypeVar) and wt != bp.type_ref.type:
                return False
        return True

    def _retype_int(self, e: A.Expression, target: T.P4Type, base: T.P4Type) -> None:
        if isinstance(e, A.TernaryExpression):
            self.coerce(e.then, target, "conditional branch")
            self.coerce(e.else_, target, "conditional branch")
        elif isinstance(e, A.BinaryExpression) and e.op not in ("<<", ">>") and \
                isinstance(e.left.type, T.IntType) and isinstance(e.right.type, T.IntType):
            self._retype_int(e.left, target, base)
            self._retype_int(e.right, target, base)
        elif isinstance(e, A.BinaryExpression) and e.op in ("<<", ">>") and isinstance(e.left.type, T.IntType):
            self._retype_int(e.left, target, base)
        elif isinstance(e, A.UnaryExpression) and isinstance(e.operand.type, T.IntType):
            self._retype_int(e.operand, target, base)
        if e.const_value is not None and not isinstance(e.const_value, bool):
            e.const_value = wrap(e.const_value, base)
        elif not isinstance(e, (A.TernaryExpression, A.BinaryExpression, A.UnaryExpression)):
            raise P4TypeError(e.loc, f"cannot infer the width of this integer expression; expected {target}")
        e.type = target


def describe_decl(decl: Any) -> str:
    kinds = {
        A.ActionDecl: "action", A.TableDecl: "table", A.ParserDecl: "parser", A.ControlDecl: "control",
        A.ExternDecl: "extern", A.ExternFunctionDecl: "extern function", A.FunctionDecl: "function",
        A.HeaderDecl: "header", A.StructDecl: "struct", A.Parameter: "parameter",
        A.VariableDecl: "variable", A.ConstDecl: "constant", A.InstantiationDecl: "instance",
    }
    return f"{kinds.get(type(decl), 'declaration')} '{getattr(decl, 'name', '?')}'"


__all__ = ["P4Error", "TypeResolver", "describe_decl"]
