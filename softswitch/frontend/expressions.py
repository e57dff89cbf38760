"""Type checking, width inference and constant folding of expressions and calls.

Why one pass that does all three: the type of an operand decides how a literal is
sized and how a constant wraps, so typing and folding cannot be separated.  Results
are written onto the nodes (``.type``, ``.const_value``, ``.decl``, ``.kind``,
``.call_kind``, ``.callee_decl``, ``.params``, ``.type_bindings``), see ``ast``.
"""
from __future__ import annotations

from typing import Any

from . import ast as A
from . import types as T
from .constfold import concat, fold_binary, wrap
from .errors import P4NameError, P4TypeError, P4Unsupported
from .scope import Scope
from .typeresolve import TypeResolver, describe_decl

_CMP = frozenset({"<", "<=", ">", ">="})
_EQ = frozenset({"==", "!="})
_HEADER_METHODS = {"isValid": T.BOOL, "setValid": T.VOID, "setInvalid": T.VOID}


class ExpressionChecker(TypeResolver):
    def __init__(self) -> None:
        super().__init__()
        self.cur_tparams: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ entry
    def check_expr(self, e: A.Expression, scope: Scope) -> T.P4Type:
        if e.type is not None:
            return e.type
        method = getattr(self, "_x_" + type(e).__name__, None)
        if method is None:
            raise P4Unsupported(e.loc, f"expression {type(e).__name__}")
        t = method(e, scope)
        e.type = t
        return t

    # ------------------------------------------------------------------ leaves
    def _x_IntLiteral(self, e: A.IntLiteral, scope: Scope) -> T.P4Type:
        if e.width is None:
            e.const_value = e.value
            return T.INT
        if e.width <= 0 and not (e.width == 0 and not e.signed):
            raise P4TypeError(e.loc, f"invalid width {e.width} in literal '{e.text}'")
        t = T.BitsType(e.width, e.signed)
        e.const_value = wrap(e.value, t)
        return t

    def _x_BoolLiteral(self, e: A.BoolLiteral, scope: Scope) -> T.P4Type:
        e.const_value = e.value
        return T.BOOL

    def _x_StringLiteral(self, e: A.StringLiteral, scope: Scope) -> T.P4Type:
        return T.STRING

    def _x_DontCareExpression(self, e: A.DontCareExpression, scope: Scope) -> T.P4Type:
        return T.DONT_CARE

    def _x_TypeNameExpression(self, e: A.TypeNameExpression, scope: Scope) -> T.P4Type:
        return T.TypeOfType(self.resolve(e.type_ref, scope, self.cur_tparams))

    def _x_ListExpression(self, e: A.ListExpression, scope: Scope) -> T.P4Type:
        return T.TupleType(tuple(self.check_expr(x, scope) for x in e.elems))

    def _x_StructExpression(self, e: A.StructExpression, scope: Scope) -> T.P4Type:
        seen: set[str] = set()
        fields = []
        for f in e.fields:
            if f.name in seen:
                raise P4TypeError(f.loc, f"field '{f.name}' given twice in initialiser")
            seen.add(f.name)
            fields.append((f.name, self.check_expr(f.value, scope)))
        return T.StructType("", tuple(fields))

    def _x_PathExpression(self, e: A.PathExpression, scope: Scope) -> T.P4Type:
        decl = (self.top if e.dot_prefix else scope).lookup(e.name)
        if decl is None:
            raise P4NameError(e.loc, f"undeclared name '{e.name}'{scope.suggest(e.name)}")
        e.decl = decl
        return self.type_of_decl(decl, e)

    def type_of_decl(self, decl: Any, e: A.Expression) -> T.P4Type:
        if isinstance(decl, (A.Parameter, A.VariableDecl)):
            assert decl.type_ref.type is not None, decl.name
            return decl.type_ref.type
        if isinstance(decl, A.ConstDecl):
            e.const_value = decl.value.const_value
            assert decl.type_ref.type is not None
            return decl.type_ref.type
        if isinstance(decl, A.InstantiationDecl):
            assert decl.type_ref.type is not None
            return decl.type_ref.type
        if isinstance(decl, A.TableDecl):
            return T.TableType(decl.name)
        if isinstance(decl, A.ActionDecl):
            return T.ActionType(decl.name)
        if isinstance(decl, (A.FunctionDecl, A.ExternFunctionDecl)):
            return T.FunctionType(decl.name)
        if isinstance(decl, A.ValueSetDecl):
            assert decl.elem_type.type is not None
            return T.SetType(decl.elem_type.type)
        if isinstance(decl, A.ParserState):
            return T.StateType()
        if isinstance(decl, (A.HeaderDecl, A.StructDecl, A.HeaderUnionDecl, A.EnumDecl, A.TypedefDecl,
                             A.ExternDecl, A.ParserDecl, A.ControlDecl, A.ErrorDecl)):
            return T.TypeOfType(self.decl_type(decl, (), e.loc))
        raise P4TypeError(e.loc, f"{describe_decl(decl)} cannot be used as a value")

    # ------------------------------------------------------------------ members
    def _x_MemberExpression(self, e: A.MemberExpression, scope: Scope) -> T.P4Type:
        bt = self.check_expr(e.expr, scope)
        m = e.member
        if isinstance(bt, T.TypeOfType):
            return self._type_member(e, bt.of)
        base = T.strip_newtype(bt)
        if isinstance(base, T.StructLikeType):
            ft = base.field_type(m)
            if ft is not None:
                e.kind = A.MemberKind.FIELD
                e.decl = self._field_decl(base, m)
                return ft
            if isinstance(base, (T.HeaderType, T.HeaderUnionType)) and m in _HEADER_METHODS:
                if isinstance(base, T.HeaderUnionType) and m != "isValid":
                    raise P4TypeError(e.loc, f"header union {base} has no method '{m}'")
                e.kind = A.MemberKind.METHOD
                return T.FunctionType(m)
            names = list(base.field_names()) + (list(_HEADER_METHODS) if isinstance(base, T.HeaderType) else [])
            raise P4NameError(e.loc, f"{base} has no field '{m}'{scope.suggest(m, candidates=names)}")
        if isinstance(base, T.StackType):
            kinds = {"next": A.MemberKind.STACK_NEXT, "last": A.MemberKind.STACK_LAST}
            if m in kinds:
                e.kind = kinds[m]
                return base.elem
            if m in ("size", "lastIndex"):
                e.kind = A.MemberKind.STACK_SIZE if m == "size" else A.MemberKind.STACK_LAST_INDEX
                if m == "size":
                    e.const_value = base.size
                return T.BitsType(32)
            if m in ("push_front", "pop_front"):
                e.kind = A.MemberKind.METHOD
                return T.FunctionType(m)
            raise P4NameError(e.loc, f"header stack {base} has no member '{m}'"
                              f"{scope.suggest(m, candidates=['next', 'last', 'size', 'lastIndex', 'push_front', 'pop_front'])}")
        if isinstance(base, T.ApplyResultType):
            if m in ("hit", "miss"):
                e.kind = A.MemberKind.TABLE_HIT if m == "hit" else A.MemberKind.TABLE_MISS
                return T.BOOL
            if m == "action_run":
                e.kind = A.MemberKind.TABLE_ACTION_RUN
                tbl = self._table_of_apply(e.expr)
                return T.ActionEnumType(base.table, tuple(a.name.name for a in tbl.actions) if tbl else ())
            raise P4NameError(e.loc, f"the result of {base.table}.apply() has no member '{m}' (hit, miss, action_run)")
        if isinstance(base, (T.ExternType, T.TableType, T.ParserType, T.ControlType)):
            e.kind = A.MemberKind.METHOD
            return T.FunctionType(m)
        raise P4TypeError(e.loc, f"cannot access member '{m}' of a value of type {bt}")

    def _field_decl(self, t: T.StructLikeType, name: str) -> Any:
        decl = self.top.lookup(t.name)
        for f in getattr(decl, "fields", []):
            if f.name == name:
                return f
        return None

    def _table_of_apply(self, e: A.Expression) -> A.TableDecl | None:
        if isinstance(e, A.MethodCallExpression) and isinstance(e.callee_decl, A.TableDecl):
            return e.callee_decl
        return None

    def _type_member(self, e: A.MemberExpression, t: T.P4Type) -> T.P4Type:
        m = e.member
        if isinstance(t, T.ErrorType):
            for mem in self.error_members:
                if mem.name == m:
                    e.kind, e.decl = A.MemberKind.ERROR_MEMBER, mem
                    return t
            raise P4NameError(e.loc, f"undeclared error 'error.{m}'"
                              f"{Scope().suggest(m, candidates=[x.name for x in self.error_members])}")
        if isinstance(t, T.MatchKindType):
            for mem in self.match_kind_members:
                if mem.name == m:
                    e.kind, e.decl = A.MemberKind.MATCH_KIND_MEMBER, mem
                    return t
            raise P4NameError(e.loc, f"undeclared match_kind '{m}'")
        if isinstance(t, (T.EnumType, T.SerEnumType)):
            decl = self.top.lookup(t.name)
            for mem in getattr(decl, "members", []):
                if mem.name == m:
                    e.kind, e.decl = A.MemberKind.ENUM_MEMBER, mem
                    if isinstance(t, T.SerEnumType):
                        e.const_value = mem.int_value
                    return t
            names = [x.name for x in getattr(decl, "members", [])]
            raise P4NameError(e.loc, f"enum {t.name} has no member '{m}'{Scope().suggest(m, candidates=names)}")
        if isinstance(t, (T.ParserType, T.ControlType)) and m == "apply":
            # direct invocation ``MyControl.apply(...)``: an anonymous instance (P4_16 1.2)
            e.kind = A.MemberKind.METHOD
            return T.FunctionType(m)
        raise P4Unsupported(e.loc, f"member '{m}' of type {t}")

    def _x_IndexExpression(self, e: A.IndexExpression, scope: Scope) -> T.P4Type:
        bt = T.strip_newtype(self.check_expr(e.expr, scope))
        it = self.check_expr(e.index, scope)
        if not isinstance(bt, T.StackType):
            raise P4TypeError(e.loc, f"cannot index a value of type {bt}; only header stacks can be indexed")
        if not isinstance(T.strip_newtype(it), (T.BitsType, T.IntType)):
            raise P4TypeError(e.index.loc, f"stack index must be an integer, got {it}")
        if isinstance(e.index.const_value, int) and not 0 <= e.index.const_value < bt.size:
                raise P4TypeError(e.index.loc, f"index {e.index.const_value} out of bounds for header stack of size {bt.size}")
        return bt.elem

    def _x_SliceExpression(self, e: A.SliceExpression, scope: Scope) -> T.P4Type:
        bt = T.strip_newtype(self.check_expr(e.expr, scope))
        hi = self.const_int(e.hi, scope, "slice bound")
        lo = self.const_int(e.lo, scope, "slice bound")
        if isinstance(bt, T.SerEnumType):
            bt = bt.underlying
        if isinstance(bt, T.IntType) and e.expr.const_value is not None:
            width = hi + 1
        elif isinstance(bt, T.BitsType):
            width = bt.width
        else:
            raise P4TypeError(e.loc, f"cannot slice a value of type {bt}")
        if not (0 <= lo <= hi < width):
            raise P4TypeError(e.loc, f"slice [{hi}:{lo}] out of range for {bt}")
        e.hi_value, e.lo_value = hi, lo
        if isinstance(e.expr.const_value, int) and not isinstance(e.expr.const_value, bool):
            e.const_value = (e.expr.const_value >> lo) & ((1 << (hi - lo + 1)) - 1)
        return T.BitsType(hi - lo + 1)

    # ------------------------------------------------------------------ operators
    def _x_UnaryExpression(self, e: A.UnaryExpression, scope: Scope) -> T.P4Type:
        t = self.check_expr(e.operand, scope)
        base = T.strip_newtype(t)
        cv = e.operand.const_value
        if e.op == "!":
            if not isinstance(base, T.BoolType):
                raise P4TypeError(e.loc, f"operand of '!' must be bool, got {t}")
            if cv is not None:
                e.const_value = not cv
            return t
        if e.op == "~":
            if not isinstance(base, T.BitsType):
                raise P4TypeError(e.loc, f"operand of '~' must be bit<W> or int<W>, got {t}")
            if isinstance(cv, int):
                e.const_value = wrap(~cv, base)
            return t
        if not isinstance(base, (T.BitsType, T.IntType)):
            raise P4TypeError(e.loc, f"operand of unary '{e.op}' must be a number, got {t}")
        if isinstance(cv, int) and not isinstance(cv, bool):
            e.const_value = wrap(-cv if e.op == "-" else cv, base)
        return t

    def _unify_operands(self, e: A.BinaryExpression) -> T.P4Type:
        lt, rt = e.left.type, e.right.type
        assert lt is not None and rt is not None
        if lt == rt:
            return lt
        if isinstance(lt, T.IntType):
            self.coerce(e.left, rt, f"left operand of '{e.op}'")
            return rt
        if isinstance(rt, T.IntType):
            self.coerce(e.right, lt, f"right operand of '{e.op}'")
            return lt
        if isinstance(lt, T.SerEnumType) and rt == lt.underlying:
            return rt
        if isinstance(rt, T.SerEnumType) and lt == rt.underlying:
            return lt
        lb, rb = T.strip_newtype(lt), T.strip_newtype(rt)
        if isinstance(lb, T.BitsType) and isinstance(rb, T.BitsType) and lb.signed == rb.signed:
            raise P4TypeError(e.loc, f"width mismatch: operands of '{e.op}' are {lt} and {rt}")
        raise P4TypeError(e.loc, f"type mismatch: operands of '{e.op}' are {lt} and {rt}")

    def _x_BinaryExpression(self, e: A.BinaryExpression, scope: Scope) -> T.P4Type:
        lt = self.check_expr(e.left, scope)
        rt = self.check_expr(e.right, scope)
        op = e.op
        lc, rc = e.left.const_value, e.right.const_value
        if op in ("&&", "||"):
            for side, st in (("left", lt), ("right", rt)):
                if not isinstance(st, T.BoolType):
                    raise P4TypeError(e.loc, f"{side} operand of '{op}' must be bool, got {st}")
            if lc is not None and rc is not None:
                e.const_value = fold_binary(op, lc, rc, T.BOOL)
            return T.BOOL
        if op == "++":
            lb, rb = T.strip_newtype(lt), T.strip_newtype(rt)
            for side, st, sub in (("left", lb, e.left), ("right", rb, e.right)):
                if isinstance(st, T.IntType):
                    raise P4TypeError(sub.loc, f"{side} operand of '++' has no width; write it with one, e.g. 8w{sub.const_value}")
                if not isinstance(st, T.BitsType):
                    raise P4TypeError(sub.loc, f"{side} operand of '++' must be bit<W> or int<W>, got {st}")
            assert isinstance(lb, T.BitsType) and isinstance(rb, T.BitsType)
            cat = T.BitsType(lb.width + rb.width, lb.signed)
            if isinstance(lc, int) and isinstance(rc, int):
                e.const_value = wrap(concat(lc, lb.width, rc, rb.width), cat)
            return cat
        if op in ("<<", ">>"):
            slb, srb = T.strip_newtype(lt), T.strip_newtype(rt)
            if not isinstance(slb, (T.BitsType, T.IntType)):
                raise P4TypeError(e.left.loc, f"left operand of '{op}' must be a number, got {lt}")
            if isinstance(srb, T.BitsType) and srb.signed or not isinstance(srb, (T.BitsType, T.IntType)):
                raise P4TypeError(e.right.loc, f"shift amount must be an unsigned number, got {rt}")
            if isinstance(rc, int) and rc < 0:
                raise P4TypeError(e.right.loc, f"shift amount must not be negative, got {rc}")
            if isinstance(slb, T.IntType) and rc is None:
                raise P4TypeError(e.loc, f"shifting an integer without width needs a constant amount; give '{op}' a sized left operand")
            if lc is not None and rc is not None:
                e.const_value = fold_binary(op, lc, rc, lt)
            return lt
        t = self._unify_operands(e)
        base: T.P4Type = T.strip_newtype(t)
        if isinstance(base, T.SerEnumType) and op not in _EQ:
            base = base.underlying
        lc, rc = e.left.const_value, e.right.const_value
        if op in _EQ:
            if isinstance(base, (T.ExternType, T.TableType, T.VoidType)):
                raise P4TypeError(e.loc, f"values of type {t} cannot be compared")
            if lc is not None and rc is not None:
                e.const_value = fold_binary(op, lc, rc, t)
            return T.BOOL
        if not isinstance(base, (T.BitsType, T.IntType)):
            raise P4TypeError(e.loc, f"operands of '{op}' must be numbers, got {t}")
        if op in ("|+|", "|-|") and isinstance(base, T.IntType):
            raise P4TypeError(e.loc, f"saturating '{op}' needs operands with a width, got {t}")
        if op in ("/", "%") and isinstance(rc, int) and rc == 0:
            raise P4TypeError(e.right.loc, f"division by zero in '{op}'")
        if lc is not None and rc is not None:
            e.const_value = fold_binary(op, lc, rc, base)
        return T.BOOL if op in _CMP else t

    def _x_TernaryExpression(self, e: A.TernaryExpression, scope: Scope) -> T.P4Type:
        ct = self.check_expr(e.cond, scope)
        if not isinstance(ct, T.BoolType):
            raise P4TypeError(e.cond.loc, f"condition of '?:' must be bool, got {ct}")
        a = self.check_expr(e.then, scope)
        b = self.check_expr(e.else_, scope)
        if a != b:
            if isinstance(a, T.IntType):
                self.coerce(e.then, b, "conditional branch")
                a = b
            elif isinstance(b, T.IntType):
                self.coerce(e.else_, a, "conditional branch")
            else:
                raise P4TypeError(e.loc, f"type mismatch: branches of '?:' are {a} and {b}")
        if e.cond.const_value is not None:
            chosen = e.then if e.cond.const_value else e.else_
            e.const_value = chosen.const_value
        return a

    def _x_CastExpression(self, e: A.CastExpression, scope: Scope) -> T.P4Type:
        dst = self.resolve(e.type_ref, scope, self.cur_tparams)
        src = self.check_expr(e.expr, scope)
        db, sb = T.strip_newtype(dst), T.strip_newtype(src)
        cv = e.expr.const_value
        ok = src == dst or db == sb
        if isinstance(db, T.BitsType):
            ok = ok or isinstance(sb, (T.BitsType, T.IntType, T.SerEnumType)) or \
                (isinstance(sb, T.BoolType) and db.width == 1 and not db.signed)
            if isinstance(cv, bool):
                e.const_value = int(cv)
            elif isinstance(cv, int):
                e.const_value = wrap(cv, db)
        elif isinstance(db, T.BoolType):
            ok = ok or isinstance(sb, T.BitsType) and sb.width == 1 and not sb.signed or isinstance(sb, T.IntType)
            if cv is not None:
                e.const_value = bool(cv)
        elif isinstance(db, T.SerEnumType):
            ok = ok or isinstance(sb, (T.BitsType, T.IntType))
            if isinstance(cv, int):
                e.const_value = wrap(cv, db.underlying)
        elif isinstance(db, T.IntType):
            ok = ok or isinstance(sb, T.BitsType) and cv is not None
            e.const_value = cv
        elif isinstance(e.expr, (A.ListExpression, A.StructExpression)):
            self.coerce(e.expr, dst, "cast")
            ok = True
        if not ok:
            raise P4TypeError(e.loc, f"cannot cast {src} to {dst}")
        if isinstance(src, T.IntType) and not isinstance(e.expr, A.IntLiteral) and isinstance(db, T.BitsType):
            if cv is not None:
                self.coerce(e.expr, db, "cast")
        elif isinstance(e.expr, A.IntLiteral) and isinstance(db, (T.BitsType, T.SerEnumType)):
            e.expr.type = db if isinstance(db, T.BitsType) else db.underlying
            e.expr.const_value = e.const_value
        return dst

    # ------------------------------------------------------------------ calls
    def _x_MethodCallExpression(self, e: A.MethodCallExpression, scope: Scope) -> T.P4Type:
        from .calls import check_call  # calls need the whole checker; import late

        return check_call(self, e, scope)

    # ------------------------------------------------------------------ l-values
    def check_lvalue(self, e: A.Expression, what: str) -> None:
        """Fail unless ``e`` may be written (variables, out/inout parameters and their parts)."""
        root = e
        while isinstance(root, (A.MemberExpression, A.IndexExpression, A.SliceExpression)):
            if isinstance(root, A.MemberExpression) and root.kind not in (
                    A.MemberKind.FIELD, A.MemberKind.STACK_NEXT, A.MemberKind.STACK_LAST):
                raise P4TypeError(e.loc, f"{what} must be an l-value; '{root.member}' cannot be written")
            root = root.expr
        if isinstance(root, A.DontCareExpression):
            return
        if not isinstance(root, A.PathExpression):
            raise P4TypeError(e.loc, f"{what} must be an l-value (a variable, field or out/inout parameter)")
        d = root.decl
        if isinstance(d, A.VariableDecl):
            return
        if isinstance(d, A.Parameter):
            if d.direction in (A.Direction.OUT, A.Direction.INOUT):
                return
            kind = "an 'in' parameter" if d.direction == A.Direction.IN else "a directionless parameter"
            raise P4TypeError(e.loc, f"{what} must be an l-value; '{d.name}' is {kind} and read-only")
        if isinstance(d, A.ConstDecl):
            raise P4TypeError(e.loc, f"{what} must be an l-value; '{d.name}' is a constant")
        raise P4TypeError(e.loc, f"{what} must be an l-value; {describe_decl(d)} cannot be written")
