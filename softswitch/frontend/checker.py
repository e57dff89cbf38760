"""The checker: names, types and widths of declarations and statements; the main package.

Why in-place annotation: consumers walk the same tree the parser built, so source
locations stay attached to everything; the annotations the checker adds are listed in
``ast``'s module docstring.  Declarations are processed in source order, as P4
requires (a name is visible after its declaration); parser states are the exception
(transitions may point forward).
"""
from __future__ import annotations

from typing import Any

from . import ast as A
from . import types as T
from .calls import bind_args, check_constructor, order_args
from .errors import P4Error, P4ErrorList, P4NameError, P4TypeError, P4Unsupported
from .expressions import ExpressionChecker
from .keysets import check_keyset, value_set_fits
from .scope import Scope
from .typeresolve import describe_decl


class Checker(ExpressionChecker):
    def __init__(self) -> None:
        super().__init__()
        self.return_type: T.P4Type | None = None  # inside a function body
        self.in_action = False
        self.in_parser = False
        self.loop_depth = 0  # for loops around the statement being checked (break/continue)
        self.problems: list[P4Error] = []  # errors found so far (checking goes on after one)

    _MAX_ERRORS = 20

    def recover(self, fn: Any, *args: Any) -> None:
        """Run one independent check; record its error and carry on with the next one, so
        a single run reports several mistakes (like a compiler)."""
        try:
            fn(*args)
        except P4ErrorList:
            raise
        except P4Error as exc:
            if all((p.loc, p.message) != (exc.loc, exc.message) for p in self.problems):
                self.problems.append(exc)
            if len(self.problems) >= self._MAX_ERRORS:
                raise P4ErrorList(self.problems) from None

    def raise_problems(self) -> None:
        if len(self.problems) == 1:
            raise self.problems[0]
        if self.problems:
            raise P4ErrorList(self.problems)

    # ================================================================== program
    def check_program(self, prog: A.Program) -> A.CheckedProgram:
        top_level: dict[str, A.Declaration] = {}
        for d in prog.declarations:
            self.recover(self.check_top, d)
            if not isinstance(d, (A.ErrorDecl, A.MatchKindDecl)):
                top_level.setdefault(d.name, d)
        self.raise_problems()
        main = self.resolve_main()
        self._type_annotation_args(prog)
        return A.CheckedProgram(
            program=prog, main=main, top_level=top_level,
            errors=[m.name for m in self.error_members],
            match_kinds=[m.name for m in self.match_kind_members],
        )

    def _type_annotation_args(self, prog: A.Program) -> None:
        """Literal annotation arguments (``@id(5)``, ``@name("x")``, ``@field_list(1)``)
        get ``.type``/``.const_value`` like any expression."""
        for node in A.iter_nodes(prog):
            if isinstance(node, A.Annotation):
                for arg in list(node.args) + list(node.kv.values()):
                    if isinstance(arg, (A.IntLiteral, A.StringLiteral, A.BoolLiteral)):
                        self.check_expr(arg, self.top)

    def check_top(self, d: A.Declaration) -> None:
        scope = self.top
        if isinstance(d, A.ErrorDecl):
            self._add_members(d, self.error_members, "error")
            return
        if isinstance(d, A.MatchKindDecl):
            self._add_members(d, self.match_kind_members, "match_kind")
            return
        if isinstance(d, (A.HeaderDecl, A.HeaderUnionDecl, A.StructDecl, A.EnumDecl, A.TypedefDecl)):
            scope.declare(d.name, d, d.loc)
            try:
                self.declare_type(d, scope)
            except P4Error:
                self.type_cache[id(d)] = T.DONT_CARE  # uses of a broken type add no errors
                raise
            return
        if isinstance(d, A.ConstDecl):
            self.check_const(d, scope)
            return
        if isinstance(d, (A.ExternDecl, A.ParserTypeDecl, A.ControlTypeDecl, A.PackageTypeDecl)):
            scope.declare(d.name, d, d.loc)
            self.check_prototype(d)
            return
        if isinstance(d, A.ExternFunctionDecl):
            scope.declare(d.name, d, d.loc)
            tps = frozenset(d.type_params)
            self.check_params(d.params, scope, tps, f"extern function '{d.name}'")
            self.resolve(d.return_type, scope, tps)
            return
        if isinstance(d, A.FunctionDecl):
            self.check_function(d, scope)
            return
        if isinstance(d, A.ActionDecl):
            self.check_action(d, scope)
            return
        if isinstance(d, A.ParserDecl):
            self.check_parser(d)
            return
        if isinstance(d, A.ControlDecl):
            self.check_control(d)
            return
        if isinstance(d, A.InstantiationDecl):
            self.check_instantiation(d, scope)
            return
        if isinstance(d, A.VariableDecl):
            raise P4TypeError(d.loc, f"variable '{d.name}' cannot be declared at top level; use const")
        raise P4Unsupported(d.loc, f"top-level declaration {type(d).__name__}")

    def _add_members(self, d: A.ErrorDecl | A.MatchKindDecl, into: list[A.EnumMember], what: str) -> None:
        names = {m.name for m in into}
        for m in d.members:
            if m.name in names:
                raise P4NameError(m.loc, f"{what} '{m.name}' is already declared")
            names.add(m.name)
            m.int_value = len(into)
            into.append(m)

    # ================================================================== pieces
    def check_const(self, d: A.ConstDecl, scope: Scope) -> None:
        t = self.resolve(d.type_ref, scope, self.cur_tparams)
        try:
            self.check_expr(d.value, scope)
            self.coerce(d.value, t, f"value of constant '{d.name}'")
            if d.value.const_value is None and not isinstance(d.value, (A.ListExpression, A.StructExpression)) \
                    and not isinstance(T.strip_newtype(t), (T.EnumType, T.ErrorType, T.StringType)):
                raise P4TypeError(d.value.loc, f"value of constant '{d.name}' must be known at compile time")
        finally:  # declared even when the value is wrong: no follow-up errors
            scope.declare(d.name, d, d.loc)

    def check_params(self, params: list[A.Parameter], scope: Scope, tparams: frozenset[str], what: str,
                     declare_in: Scope | None = None) -> None:
        seen: set[str] = set()
        for p in params:
            if p.name in seen:
                raise P4NameError(p.loc, f"parameter '{p.name}' declared twice in {what}")
            seen.add(p.name)
            t = self.resolve(p.type_ref, scope, tparams)
            if p.default is not None:
                self.check_expr(p.default, scope)
                self.coerce(p.default, t, f"default value of parameter '{p.name}'")
            if declare_in is not None:
                declare_in.declare(p.name, p, p.loc)

    def check_prototype(self, d: A.Declaration) -> None:
        if isinstance(d, A.ExternDecl):
            for md in d.methods:
                tps = frozenset(d.type_params) | frozenset(md.type_params)
                if md.is_constructor and md.name != d.name:
                    raise P4NameError(md.loc, f"constructor '{md.name}' of extern '{d.name}' must be named '{d.name}'")
                self.check_params(md.params, self.top, tps, f"method '{d.name}.{md.name}'")
                if md.return_type is not None:
                    self.resolve(md.return_type, self.top, tps)
            return
        assert isinstance(d, (A.ParserTypeDecl, A.ControlTypeDecl, A.PackageTypeDecl))
        self.check_params(d.params, self.top, frozenset(d.type_params), f"'{d.name}'")

    def check_function(self, d: A.FunctionDecl, scope: Scope) -> None:
        scope.declare(d.name, d, d.loc)
        if d.type_params:
            raise P4Unsupported(d.loc, f"generic function '{d.name}'")
        saved = self.cur_tparams
        self.cur_tparams = saved | frozenset(d.type_params)
        try:
            inner = scope.child("function")
            self.check_params(d.params, scope, self.cur_tparams, f"function '{d.name}'", declare_in=inner)
            rt = self.resolve(d.return_type, scope, self.cur_tparams)
            prev, self.return_type = self.return_type, rt
            try:
                self.check_block(d.body, inner, new_scope=False)
            finally:
                self.return_type = prev
        finally:
            self.cur_tparams = saved

    def check_action(self, d: A.ActionDecl, scope: Scope) -> None:
        scope.declare(d.name, d, d.loc)
        inner = scope.child("action")
        self.check_params(d.params, scope, self.cur_tparams, f"action '{d.name}'", declare_in=inner)
        seen_data = False
        for p in d.params:
            if p.direction == A.Direction.NONE:
                seen_data = True
            elif seen_data:
                raise P4TypeError(p.loc, f"parameter '{p.name}' of action '{d.name}': parameters with a direction must come before action data parameters")
        prev, self.in_action = self.in_action, True
        try:
            self.check_block(d.body, inner, new_scope=False)
        finally:
            self.in_action = prev

    def check_instantiation(self, d: A.InstantiationDecl, scope: Scope) -> None:
        t = check_constructor(self, None, d.type_ref, d.args, scope)
        d.type_ref.type = t
        base = d.type_ref.base if isinstance(d.type_ref, A.SpecializedTypeRef) else d.type_ref
        d.type_decl = getattr(base, "decl", None)
        if isinstance(d.type_decl, A.ExternDecl):
            d.ctor = next((m for m in d.type_decl.constructors
                           if len([p for p in m.params if p.default is None and not p.optional]) <= len(d.args) <= len(m.params)), None)
            d.type_bindings = dict(zip(d.type_decl.type_params, getattr(t, "args", ())))
        scope.declare(d.name, d, d.loc)

    # ================================================================== parsers
    def check_parser(self, d: A.ParserDecl) -> None:
        self.top.declare(d.name, d, d.loc)
        if d.type_params:
            raise P4Unsupported(d.loc, f"generic parser '{d.name}'")
        ps = self.top.child("parser")
        self.check_params(d.params, self.top, frozenset(), f"parser '{d.name}'", declare_in=ps)
        self.check_params(d.ctor_params, self.top, frozenset(), f"parser '{d.name}'", declare_in=ps)
        for loc_decl in d.locals:
            self.recover(self.check_local, loc_decl, ps)
        states = ps.child("states")
        for name in ("accept", "reject"):
            st = A.ParserState(name=name, loc=d.loc)
            d.builtin_states[name] = st
            states.names[name] = [st]
        for st in d.states:
            if st.name in ("accept", "reject"):
                raise P4NameError(st.loc, f"state '{st.name}' is built in and cannot be declared")
            states.declare(st.name, st, st.loc)
        if not any(st.name == "start" for st in d.states):
            raise P4NameError(d.loc, f"parser '{d.name}' has no 'start' state")
        prev, self.in_parser = self.in_parser, True
        try:
            for st in d.states:
                self.recover(self.check_state, st, ps, states, d)
        finally:
            self.in_parser = prev

    def _state_ref(self, ref: A.PathExpression, states: Scope, parser: A.ParserDecl) -> None:
        found = states.names.get(ref.name)
        if not found:
            names = list(states.names)
            raise P4NameError(ref.loc, f"undeclared state '{ref.name}' in parser '{parser.name}'"
                              f"{states.suggest(ref.name, candidates=names)}")
        ref.decl = found[0]
        ref.type = T.StateType()

    def check_state(self, st: A.ParserState, ps: Scope, states: Scope, parser: A.ParserDecl) -> None:
        body = ps.child("state")
        for s in st.statements:
            self.check_stmt(s, body)
        tr = st.transition
        if tr is None:
            return
        if isinstance(tr, A.PathExpression):
            self._state_ref(tr, states, parser)
            return
        key_types = [self.check_expr(k, body) for k in tr.keys]
        for i, kt in enumerate(key_types):
            if isinstance(kt, T.IntType):
                raise P4TypeError(tr.keys[i].loc, "select key has no width; cast it, e.g. (bit<8>) expression")
        for case in tr.cases:
            self._state_ref(case.next_state, states, parser)
            ks = case.keysets
            if len(ks) == 1 and isinstance(ks[0], A.DefaultKeyset):
                continue
            if len(ks) == 1 and isinstance(ks[0], A.ValueKeyset) and len(key_types) > 1:
                vs = ks[0].expr
                self.check_expr(vs, body)
                if isinstance(vs.type, T.SetType):
                    if not value_set_fits(vs.type.elem, key_types):
                        raise P4TypeError(case.loc, f"select case: value_set of {vs.type.elem} used for "
                                                    f"keys of types ({', '.join(map(str, key_types))})")
                    continue
            if len(ks) != len(key_types):
                raise P4TypeError(case.loc, f"select case has {len(ks)} keyset(s) for {len(key_types)} key(s)")
            for k, kt in zip(ks, key_types):
                check_keyset(self, k, kt, body, "select case")

    # ================================================================== controls
    def check_control(self, d: A.ControlDecl) -> None:
        self.top.declare(d.name, d, d.loc)
        if d.type_params:
            raise P4Unsupported(d.loc, f"generic control '{d.name}'")
        cs = self.top.child("control")
        self.check_params(d.params, self.top, frozenset(), f"control '{d.name}'", declare_in=cs)
        self.check_params(d.ctor_params, self.top, frozenset(), f"control '{d.name}'", declare_in=cs)
        for loc_decl in d.locals:
            self.recover(self.check_local, loc_decl, cs)
        self.check_block(d.body, cs)

    def check_local(self, d: A.Declaration, scope: Scope) -> None:
        if isinstance(d, A.ConstDecl):
            self.check_const(d, scope)
        elif isinstance(d, A.VariableDecl):
            self.check_var(d, scope)
        elif isinstance(d, A.InstantiationDecl):
            self.check_instantiation(d, scope)
        elif isinstance(d, A.ActionDecl):
            self.check_action(d, scope)
        elif isinstance(d, A.TableDecl):
            from .tables import check_table

            check_table(self, d, scope)
        elif isinstance(d, A.FunctionDecl):
            self.check_function(d, scope)
        elif isinstance(d, A.ValueSetDecl):
            et = self.resolve(d.elem_type, scope)
            self.const_int(d.size, scope, f"size of value_set '{d.name}'")
            if isinstance(et, T.IntType):
                raise P4TypeError(d.loc, f"value_set '{d.name}' needs an element type with a width")
            scope.declare(d.name, d, d.loc)
        else:
            raise P4Unsupported(d.loc, f"local declaration {type(d).__name__}")

    def check_var(self, d: A.VariableDecl, scope: Scope) -> None:
        t = self.resolve(d.type_ref, scope, self.cur_tparams)
        if isinstance(t, (T.IntType, T.VoidType)):
            raise P4TypeError(d.loc, f"variable '{d.name}' cannot have type {t}")
        try:
            if d.init is not None:
                self.check_expr(d.init, scope)
                self.coerce(d.init, t, f"initial value of '{d.name}'")
        finally:  # declared even when the initialiser is wrong: no follow-up errors
            scope.declare(d.name, d, d.loc)

    # ================================================================== statements
    def check_block(self, b: A.BlockStatement, scope: Scope, *, new_scope: bool = True) -> None:
        inner = scope.child() if new_scope else scope
        for s in b.statements:
            self.recover(self.check_stmt, s, inner)

    def check_stmt(self, s: Any, scope: Scope) -> None:
        if isinstance(s, A.AssignmentStatement):
            lt = self.check_expr(s.lhs, scope)
            self.check_lvalue(s.lhs, "left side of '='")
            self.check_expr(s.rhs, scope)
            self.coerce(s.rhs, lt, "assignment")
        elif isinstance(s, A.MethodCallStatement):
            self.check_expr(s.call, scope)
        elif isinstance(s, A.BlockStatement):
            self.check_block(s, scope)
        elif isinstance(s, A.IfStatement):
            ct = self.check_expr(s.cond, scope)
            if not isinstance(ct, T.BoolType):
                raise P4TypeError(s.cond.loc, f"condition of 'if' must be bool, got {ct}")
            self.check_stmt(s.then, scope.child())
            if s.else_ is not None:
                self.check_stmt(s.else_, scope.child())
        elif isinstance(s, A.SwitchStatement):
            self.check_switch(s, scope)
        elif isinstance(s, A.ExitStatement):
            if self.in_parser:
                raise P4TypeError(s.loc, "'exit' is not allowed in a parser")
        elif isinstance(s, A.ReturnStatement):
            if self.in_parser and self.return_type is None and not self.in_action:
                raise P4TypeError(s.loc, "'return' is not allowed in a parser state")
            if s.value is not None:
                if self.return_type is None or isinstance(self.return_type, T.VoidType):
                    raise P4TypeError(s.loc, "'return' with a value outside a function returning a value")
                self.check_expr(s.value, scope)
                self.coerce(s.value, self.return_type, "return value")
            elif self.return_type is not None and not isinstance(self.return_type, T.VoidType):
                raise P4TypeError(s.loc, f"'return' needs a value of type {self.return_type}")
        elif isinstance(s, A.EmptyStatement):
            pass
        elif isinstance(s, A.ForStatement):
            self.check_for(s, scope)
        elif isinstance(s, A.ForInStatement):
            self.check_for_in(s, scope)
        elif isinstance(s, (A.BreakStatement, A.ContinueStatement)):
            if not self.loop_depth:
                word = "break" if isinstance(s, A.BreakStatement) else "continue"
                raise P4TypeError(s.loc, f"'{word}' outside a for loop")
        elif isinstance(s, A.VariableDecl):
            self.check_var(s, scope)
        elif isinstance(s, A.ConstDecl):
            self.check_const(s, scope)
        elif isinstance(s, A.InstantiationDecl):
            raise P4TypeError(s.loc, f"instance '{s.name}' cannot be declared inside a block")
        else:
            raise P4Unsupported(getattr(s, "loc", None), f"statement {type(s).__name__}")

    def check_loop_body(self, body: Any, scope: Scope) -> None:
        if self.in_parser and not self.in_action and self.return_type is None:
            raise P4TypeError(body.loc, "a for loop is not allowed in a parser state")
        self.loop_depth += 1
        try:
            self.check_stmt(body, scope.child())
        finally:
            self.loop_depth -= 1

    def check_for(self, s: A.ForStatement, scope: Scope) -> None:
        inner = scope.child()
        for st in s.init:
            self.check_stmt(st, inner)
        if s.cond is not None:
            ct = self.check_expr(s.cond, inner)
            if not isinstance(ct, T.BoolType):
                raise P4TypeError(s.cond.loc, f"condition of 'for' must be bool, got {ct}")
        for st in s.update:
            if isinstance(st, A.VariableDecl):
                raise P4TypeError(st.loc, "the update part of a for loop cannot declare a variable")
            self.check_stmt(st, inner)
        self.check_loop_body(s.body, inner)

    def check_for_in(self, s: A.ForInStatement, scope: Scope) -> None:
        inner = scope.child()
        vt = self.resolve(s.var.type_ref, scope, self.cur_tparams)
        ct = self.check_expr(s.collection, scope)
        if s.hi is not None:
            if not isinstance(T.strip_newtype(vt), (T.BitsType, T.IntType)):
                raise P4TypeError(s.var.loc, f"loop variable '{s.var.name}' of a range must be "
                                             f"bit<W> or int<W>, not {vt}")
            self.check_expr(s.hi, scope)
            self.coerce(s.collection, vt, "lower bound of the range")
            self.coerce(s.hi, vt, "upper bound of the range")
        elif isinstance(stack_t := T.strip_newtype(ct), T.StackType):
            if T.strip_newtype(vt) != T.strip_newtype(stack_t.elem):
                raise P4TypeError(s.var.loc, f"loop variable '{s.var.name}' has type {vt}, "
                                             f"the stack holds {stack_t.elem}")
        else:
            raise P4TypeError(s.collection.loc, f"a for loop goes over a range 'lo .. hi' or a "
                                                f"header stack, not {ct}")
        inner.declare(s.var.name, s.var, s.var.loc)
        self.check_loop_body(s.body, inner)

    def check_switch(self, s: A.SwitchStatement, scope: Scope) -> None:
        t = self.check_expr(s.expr, scope)
        labels_seen: set[Any] = set()
        for i, c in enumerate(s.cases):
            if c.label is None:
                if i != len(s.cases) - 1:
                    raise P4TypeError(c.loc, "'default' must be the last switch label")
            elif isinstance(t, T.ActionEnumType):
                lab = c.label
                if not isinstance(lab, A.PathExpression) or lab.name not in t.actions:
                    name = getattr(lab, "name", "?")
                    raise P4NameError(lab.loc, f"'{name}' is not an action of table '{t.table}' "
                                      f"(its actions: {', '.join(t.actions)})")
                lab.decl = scope.lookup(lab.name)
                lab.type = t
                key: Any = lab.name
            else:
                base = T.strip_newtype(t)
                if isinstance(base, T.IntType):
                    raise P4TypeError(s.expr.loc, "switch expression has no width")
                if not isinstance(base, (T.BitsType, T.EnumType, T.SerEnumType, T.ErrorType)):
                    raise P4TypeError(s.expr.loc, f"cannot switch on a value of type {t}")
                self.check_expr(c.label, scope)
                self.coerce(c.label, t, "switch label")
                if c.label.const_value is None and not isinstance(c.label, A.MemberExpression):
                    raise P4TypeError(c.label.loc, "switch label must be a compile-time constant")
                key = c.label.const_value if c.label.const_value is not None else getattr(c.label, "member", None)
            if c.label is not None:
                if key in labels_seen:
                    raise P4TypeError(c.label.loc, "duplicate switch label")
                labels_seen.add(key)
            if c.body is not None:
                self.check_block(c.body, scope)

    # ================================================================== main
    def resolve_main(self) -> A.MainPackage | None:
        main = self.top.lookup("main")
        if main is None:
            return None
        if not isinstance(main, A.InstantiationDecl) or not isinstance(main.type_decl, A.PackageTypeDecl):
            # which package is the architecture's check: the front end accepts any
            inst = isinstance(main, A.InstantiationDecl) and main.type_decl is not None
            what = f"an instance of {describe_decl(main.type_decl)}" if inst else describe_decl(main)
            raise P4TypeError(getattr(main, "loc", None),
                              f"'main' must be an instance of a package type, not {what}")
        pkg: A.PackageTypeDecl = main.type_decl
        ordered = order_args(main.args, pkg.params, f"package '{pkg.name}'", main.loc)
        bindings: dict[str, T.P4Type] = {}
        blocks: list[A.PackageBlock] = []
        for p, a in zip(pkg.params, ordered):
            assert a is not None
            v = a.value
            if not (isinstance(v, A.MethodCallExpression) and v.call_kind == A.CallKind.CONSTRUCTOR
                    and isinstance(v.callee_decl, (A.ParserDecl, A.ControlDecl))):
                raise P4TypeError(a.loc, f"argument '{p.name}' of {pkg.name} must instantiate a parser or control, e.g. MyParser()")
            blk = v.callee_decl
            want_decl = getattr(getattr(p.type_ref, "base", p.type_ref), "decl", None)
            self._match_block(blk, want_decl, p, pkg, bindings, a.loc)
            blocks.append(A.PackageBlock(param=p.name, decl=blk, args=v.args))
        return A.MainPackage(package=pkg.name, decl=main, blocks=blocks)

    def _match_block(self, blk: Any, want: Any, p: A.Parameter, pkg: A.PackageTypeDecl,
                     b: dict[str, T.P4Type], loc: A.SourceLoc) -> None:
        kind = "parser" if isinstance(want, A.ParserTypeDecl) else "control"
        if isinstance(want, A.ParserTypeDecl) != isinstance(blk, A.ParserDecl):
            raise P4TypeError(loc, f"argument '{p.name}' of {pkg.name} must be a {kind}, but '{blk.name}' is not")
        if len(blk.params) != len(want.params):
            raise P4TypeError(loc, f"argument '{p.name}' of {pkg.name}: '{blk.name}' has {len(blk.params)} parameter(s), {want.name} needs {len(want.params)}")
        tps = frozenset(want.type_params)
        for bp, wp in zip(blk.params, want.params):
            wt = self.resolve(wp.type_ref, self.top, tps)
            bt = bp.type_ref.type
            assert bt is not None
            if bp.direction != wp.direction:
                raise P4TypeError(bp.loc, f"parameter '{bp.name}' of '{blk.name}' must be "
                                  f"{wp.direction.value or 'directionless'} to match {want.name}")
            # package type arguments are shared (H, M): bind by the package's own names
            if isinstance(wt, T.TypeVar):
                pkg_name = self._package_tvar(p, want, wt.name)
                if pkg_name in b and b[pkg_name] != bt:
                    raise P4TypeError(bp.loc, f"parameter '{bp.name}' of '{blk.name}' has type {bt}, "
                                      f"but {pkg.name} already uses {b[pkg_name]} for {pkg_name}")
                b[pkg_name] = bt
            elif wt != bt:
                raise P4TypeError(bp.loc, f"parameter '{bp.name}' of '{blk.name}' has type {bt}, {want.name} needs {wt}")

    @staticmethod
    def _package_tvar(p: A.Parameter, want: Any, name: str) -> str:
        tref = p.type_ref
        if isinstance(tref, A.SpecializedTypeRef):
            idx = list(want.type_params).index(name)
            arg = tref.args[idx] if idx < len(tref.args) else None
            if isinstance(arg, A.NamedTypeRef):
                return arg.name
        return name


__all__ = ["Checker", "bind_args", "describe_decl"]
