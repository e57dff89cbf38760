"""Calls: actions, functions, extern functions and methods, built-in methods,
``apply`` of tables/parsers/controls, and constructor calls.

Why separate: argument binding (names, defaults, counts, directions, generic type
variables, overloads by count) is the most intricate rule set of the checker and is
shared by call expressions, instantiations and table action references.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import ast as A
from . import types as T
from .errors import P4NameError, P4TypeError, P4Unsupported
from .scope import Scope

if TYPE_CHECKING:
    from .expressions import ExpressionChecker


def order_args(args: list[A.Argument], params: list[A.Parameter], what: str, loc: A.SourceLoc,
               *, allow_missing: bool = False) -> list[A.Argument | None]:
    """Arguments in parameter order; named ones placed, defaults/optionals filled."""
    out: list[A.Argument | None] = [None] * len(params)
    named = any(a.name for a in args)
    if named:
        index = {p.name: i for i, p in enumerate(params)}
        for a in args:
            if a.name is None:
                raise P4TypeError(a.loc, f"{what}: cannot mix named and positional arguments")
            if a.name not in index:
                raise P4NameError(a.loc, f"{what} has no parameter '{a.name}'")
            out[index[a.name]] = a
    else:
        if len(args) > len(params):
            raise P4TypeError(loc, f"wrong number of arguments to {what}: expected {len(params)}, got {len(args)}")
        for i, a in enumerate(args):
            out[i] = a
    for i, p in enumerate(params):
        if out[i] is None:
            if p.default is not None:
                out[i] = A.Argument(value=p.default, name=p.name, loc=loc)
            elif not (p.optional or allow_missing):
                if named:
                    raise P4TypeError(loc, f"{what}: missing argument for parameter '{p.name}'")
                required = sum(1 for q in params if q.default is None and not q.optional)
                raise P4TypeError(loc, f"wrong number of arguments to {what}: expected {required}, got {len(args)}")
    return out


def pick_overload(cands: list[Any], nargs: int, what: str, loc: A.SourceLoc) -> Any:
    for c in cands:
        required = sum(1 for p in c.params if p.default is None and not p.optional)
        if required <= nargs <= len(c.params):
            return c
    counts = sorted({len(c.params) for c in cands})
    expect = " or ".join(str(n) for n in counts)
    raise P4TypeError(loc, f"wrong number of arguments to {what}: expected {expect}, got {nargs}")


def bind_args(ck: ExpressionChecker, e: A.MethodCallExpression, params: list[A.Parameter],
              scope: Scope, what: str, bindings: dict[str, T.P4Type], tparams: frozenset[str],
              decl_scope: Scope) -> None:
    """Check arguments against parameters (types, directions); fill ``e.params``/``e.args``."""
    ordered = order_args(e.args, params, what, e.loc)
    ptypes: list[T.P4Type] = []
    for p in params:
        pt = p.type_ref.type if p.type_ref.type is not None and not tparams else None
        if pt is None:
            pt = ck.resolve(p.type_ref, decl_scope, tparams)
        ptypes.append(pt)
    for a, pt in zip(ordered, ptypes):
        if a is None:
            continue
        at = ck.check_expr(a.value, scope)
        if ck.has_typevar(pt) and not ck.unify(pt, at, bindings):
            raise P4TypeError(a.loc, f"{what}: argument of type {at} does not fit parameter type {pt}")
    for i, (a, p, pt) in enumerate(zip(ordered, params, ptypes)):
        if a is None:
            continue
        want = ck.subst(pt, bindings)
        argname = f"argument {i + 1} ('{p.name}') of {what}"
        if not isinstance(a.value, A.DontCareExpression):  # '_' fits any parameter
            if isinstance(a.value.type, T.TupleType) and isinstance(want, T.TypeVar):
                for sub in getattr(a.value, "elems", []):
                    if isinstance(sub.type, T.IntType):
                        raise P4TypeError(sub.loc, f"{argname}: cannot infer the width of integer {sub.const_value} in a list; write it with a width, e.g. 8w{sub.const_value}")
            ck.coerce(a.value, want, argname)
        if p.direction in (A.Direction.OUT, A.Direction.INOUT):
            ck.check_lvalue(a.value, f"{argname} for {p.direction.value} parameter")
    e.args = [a for a in ordered if a is not None]
    e.params = [p for a, p in zip(ordered, params) if a is not None]


def _decl_tparams(*decls: Any) -> frozenset[str]:
    out: set[str] = set()
    for d in decls:
        out.update(getattr(d, "type_params", []) or [])
    return frozenset(out)


def check_call(ck: ExpressionChecker, e: A.MethodCallExpression, scope: Scope) -> T.P4Type:
    callee = e.callee
    targs = [ck.resolve(t, scope, ck.cur_tparams) for t in e.type_args]
    if isinstance(callee, A.TypeNameExpression):
        return check_constructor(ck, e, callee.type_ref, e.args, scope)
    if isinstance(callee, A.PathExpression):
        cands = (ck.top if callee.dot_prefix else scope).lookup_all(callee.name)
        if not cands:
            raise P4NameError(callee.loc, f"undeclared function or action '{callee.name}'{scope.suggest(callee.name)}")
        d0 = cands[0]
        callee.decl = d0
        if isinstance(d0, A.ActionDecl):
            callee.type = T.ActionType(d0.name)
            e.call_kind, e.callee_decl = A.CallKind.ACTION, d0
            bind_args(ck, e, d0.params, scope, f"action '{d0.name}'", {}, frozenset(), ck.top)
            return T.VOID
        if isinstance(d0, (A.FunctionDecl, A.ExternFunctionDecl)):
            d = pick_overload(cands, len(e.args), f"function '{callee.name}'", e.loc)
            callee.decl = d
            callee.type = T.FunctionType(d.name)
            e.call_kind = A.CallKind.FUNCTION if isinstance(d, A.FunctionDecl) else A.CallKind.EXTERN_FUNCTION
            e.callee_decl = d
            b = _explicit_bindings(d.type_params, targs, f"function '{d.name}'", e.loc)
            tps = _decl_tparams(d)
            bind_args(ck, e, d.params, scope, f"function '{d.name}'", b, tps, ck.top)
            e.type_bindings = b
            return _return_type(ck, d, b, tps)
        raise P4TypeError(callee.loc, f"'{callee.name}' is not a function or action")
    if not isinstance(callee, A.MemberExpression):
        raise P4TypeError(e.loc, "this expression cannot be called")
    ck.check_expr(callee, scope)
    if callee.kind != A.MemberKind.METHOD:
        raise P4TypeError(callee.loc, f"'{callee.member}' is not a method")
    obj_t = T.strip_newtype(callee.expr.type)  # type: ignore[arg-type]
    if isinstance(obj_t, T.TypeOfType) and isinstance(obj_t.of, (T.ParserType, T.ControlType)):
        obj_t = obj_t.of  # direct invocation of a parser/control type
    m = callee.member
    if isinstance(obj_t, (T.HeaderType, T.HeaderUnionType, T.StackType)):
        return _builtin(ck, e, obj_t, m, scope)
    if isinstance(obj_t, T.TableType):
        if m != "apply":
            raise P4NameError(callee.loc, f"table {obj_t.name} has no method '{m}' (only apply)")
        tbl = scope.lookup(obj_t.name)
        if e.args:
            raise P4TypeError(e.loc, f"wrong number of arguments to table '{obj_t.name}'.apply(): expected 0, got {len(e.args)}")
        e.call_kind, e.callee_decl = A.CallKind.TABLE_APPLY, _decl_of(callee.expr) or tbl
        if getattr(ck, "in_action", False):
            raise P4TypeError(e.loc, f"table '{obj_t.name}' cannot be applied inside an action")
        return T.ApplyResultType(obj_t.name)
    if isinstance(obj_t, (T.ParserType, T.ControlType)):
        if m != "apply":
            raise P4NameError(callee.loc, f"{obj_t.name} has no method '{m}' (only apply)")
        decl = ck.top.lookup(obj_t.name)
        if not isinstance(decl, (A.ParserDecl, A.ControlDecl, A.ParserTypeDecl, A.ControlTypeDecl)):
            raise P4Unsupported(callee.loc, f"apply of {obj_t.name} here")
        e.call_kind = A.CallKind.PARSER_APPLY if isinstance(obj_t, T.ParserType) else A.CallKind.CONTROL_APPLY
        e.callee_decl = decl
        b = dict(zip(getattr(decl, "type_params", []) or [], obj_t.args))
        bind_args(ck, e, decl.params, scope, f"{obj_t.name}.apply", b, _decl_tparams(decl), ck.top)
        return T.VOID
    if isinstance(obj_t, T.ExternType):
        ext = ck.top.lookup(obj_t.name)
        if not isinstance(ext, A.ExternDecl):
            raise P4TypeError(callee.loc, f"'{obj_t.name}' is not an extern type")
        cands = [md for md in ext.methods if md.name == m and not md.is_constructor]
        if not cands:
            names = [md.name for md in ext.methods if not md.is_constructor]
            raise P4NameError(callee.loc, f"extern {obj_t.name} has no method '{m}'{scope.suggest(m, candidates=names)}")
        md = pick_overload(cands, len(e.args), f"method '{obj_t.name}.{m}'", e.loc)
        callee.decl = md
        e.call_kind, e.callee_decl = A.CallKind.EXTERN_METHOD, md
        b = dict(zip(ext.type_params, obj_t.args))
        b.update(_explicit_bindings(md.type_params, targs, f"method '{obj_t.name}.{m}'", e.loc))
        tps = _decl_tparams(ext, md)
        bind_args(ck, e, md.params, scope, f"method '{obj_t.name}.{m}'", b, tps, ck.top)
        e.type_bindings = b
        _check_packet_method(obj_t.name, m, e, b)
        return _return_type(ck, md, b, tps)
    raise P4TypeError(callee.loc, f"values of type {obj_t} have no methods")


def _emittable(t: T.P4Type) -> bool:
    if isinstance(t, (T.HeaderType, T.HeaderUnionType)):
        return True
    if isinstance(t, T.StackType):
        return True
    if isinstance(t, T.StructType):
        return all(_emittable(ft) for _, ft in t.fields)
    return False


def _check_packet_method(ext: str, m: str, e: A.MethodCallExpression, b: dict[str, T.P4Type]) -> None:
    """The core.p4 packet methods take only certain types (P4_16 spec, packet_in/out)."""
    if ext == "packet_in" and m == "extract" and e.args:
        t = e.args[0].value.type
        if isinstance(t, T.DontCareType):  # extract<H>(_): skip one H
            t = T.strip_newtype(b.get("T", t))
        if not isinstance(t, T.HeaderType):
            raise P4TypeError(e.args[0].loc, f"extract needs a header, got {t}")
        has_varbit = any(isinstance(ft, T.VarbitType) for _, ft in t.fields)
        if len(e.args) == 2 and not has_varbit:
            raise P4TypeError(e.loc, f"extract with a size needs a header with a varbit field; {t} has none")
        if len(e.args) == 1 and has_varbit:
            raise P4TypeError(e.loc, f"header {t} has a varbit field: extract it with a size in bits")
    elif ext == "packet_in" and m == "lookahead":
        t = b.get("T")
        if t is None or isinstance(t, T.TypeVar):
            raise P4TypeError(e.loc, "lookahead needs a type argument, e.g. pkt.lookahead<bit<8>>()")
        try:
            T.bit_width(t)
        except ValueError:
            raise P4TypeError(e.loc, f"lookahead needs a fixed-width type, got {t}") from None
        if isinstance(t, T.VarbitType):
            raise P4TypeError(e.loc, f"lookahead needs a fixed-width type, got {t}")
    elif ext == "packet_out" and m == "emit" and e.args:
        t = e.args[0].value.type
        if t is None or not _emittable(t):
            raise P4TypeError(e.args[0].loc, f"emit needs a header, header stack, header union or struct of those, got {t}")


def _decl_of(e: A.Expression) -> Any:
    return e.decl if isinstance(e, A.PathExpression) else None


def _explicit_bindings(tparams: list[str], targs: list[T.P4Type], what: str, loc: A.SourceLoc) -> dict[str, T.P4Type]:
    if not targs:
        return {}
    if len(targs) != len(tparams):
        raise P4TypeError(loc, f"{what} takes {len(tparams)} type argument(s), got {len(targs)}")
    return dict(zip(tparams, targs))


def _return_type(ck: ExpressionChecker, d: Any, b: dict[str, T.P4Type], tps: frozenset[str]) -> T.P4Type:
    if d.return_type is None:
        return T.VOID
    rt = ck.resolve(d.return_type, ck.top, tps)
    rt = ck.subst(rt, b)
    if ck.has_typevar(rt):
        raise P4TypeError(d.loc, f"cannot infer the return type of '{d.name}'; give type arguments")
    return rt


def _builtin(ck: ExpressionChecker, e: A.MethodCallExpression, obj_t: T.P4Type, m: str, scope: Scope) -> T.P4Type:
    e.call_kind = A.CallKind.BUILTIN_METHOD
    e.callee_decl = None
    what = f"'{m}'"
    if isinstance(obj_t, T.StackType):
        if len(e.args) != 1:
            raise P4TypeError(e.loc, f"wrong number of arguments to {what}: expected 1, got {len(e.args)}")
        n = ck.const_int(e.args[0].value, scope, f"argument of {what}")
        if n < 0:
            raise P4TypeError(e.args[0].loc, f"argument of {what} must not be negative, got {n}")
        e.params = [None]
        return T.VOID
    if e.args:
        raise P4TypeError(e.loc, f"wrong number of arguments to {what}: expected 0, got {len(e.args)}")
    if m in ("setValid", "setInvalid"):
        ck.check_lvalue(e.callee.expr, f"the header of {what}")  # type: ignore[attr-defined]
    return T.BOOL if m == "isValid" else T.VOID


def check_constructor(ck: ExpressionChecker, e: A.MethodCallExpression | None, tref: A.TypeRef,
                      args: list[A.Argument], scope: Scope) -> T.P4Type:
    """A constructor call ``Type(args)``: in an expression (``e``) or an instantiation."""
    t = ck.resolve(tref, scope, ck.cur_tparams)
    if e is not None and isinstance(e.callee, A.TypeNameExpression):
        e.callee.type = T.TypeOfType(t)
    base_ref = tref.base if isinstance(tref, A.SpecializedTypeRef) else tref
    decl = getattr(base_ref, "decl", None)
    loc = tref.loc
    if isinstance(decl, A.ExternDecl):
        ctors = decl.constructors
        if not ctors:
            raise P4TypeError(loc, f"extern {decl.name} has no constructor")
        ctor = pick_overload(ctors, len(args), f"constructor of {decl.name}", loc)
        call = e or A.MethodCallExpression(callee=A.TypeNameExpression(type_ref=tref, loc=loc), args=args, loc=loc)
        b = dict(zip(decl.type_params, getattr(t, "args", ())))
        bind_args(ck, call, ctor.params, scope, f"constructor of {decl.name}", b,
                  _decl_tparams(decl), ck.top)
        if decl.type_params and not getattr(t, "args", ()):
            args_t = tuple(b.get(n, T.TypeVar(n)) for n in decl.type_params)
            t = T.ExternType(decl.name, args_t)
        call.call_kind, call.callee_decl = A.CallKind.CONSTRUCTOR, ctor
        call.type_bindings = b
        return t
    if isinstance(decl, (A.ParserDecl, A.ControlDecl)):
        call = e or A.MethodCallExpression(callee=A.TypeNameExpression(type_ref=tref, loc=loc), args=args, loc=loc)
        bind_args(ck, call, decl.ctor_params, scope, f"constructor of {decl.name}", {}, frozenset(), ck.top)
        call.call_kind, call.callee_decl = A.CallKind.CONSTRUCTOR, decl
        return t
    if isinstance(decl, A.PackageTypeDecl):
        if e is not None:
            raise P4Unsupported(loc, f"package '{decl.name}' as a constructor argument")
        ordered = order_args(args, decl.params, f"package '{decl.name}'", loc)
        for a in ordered:
            if a is not None:
                ck.check_expr(a.value, scope)  # block arguments are matched in resolve_main
        return t
    name = getattr(base_ref, "name", "?")
    raise P4TypeError(loc, f"'{name}' cannot be instantiated")
