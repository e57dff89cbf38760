"""Parser compilation: one generated function per parser instance, a loop over states.

States become integer-numbered branches of a ``while True`` loop (accept = -1,
reject = -2); ``select`` becomes an if/elif chain over precomputed keys with
masks, ranges, value sets and defaults; no match raises ``error.NoMatch``.
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.python.body import BodyCompiler, invalidate_outs
from softswitch.backends.python.exprs import is_object_type, scalar_kind, width_of
from softswitch.backends.python.layout import strip
from softswitch.errors import CompileError
from softswitch.externs.stateful import ValueSet
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.lowering import LoweredProgram


class ParserCompiler:
    """Mixin of ProgramGen: compiles parser declarations."""

    env: dict[str, Any]
    lowered: LoweredProgram
    globals_: dict[Any, str]
    value_sets: dict[str, ValueSet]
    src: list[str]

    def fresh(self, base: str) -> str:  # pragma: no cover - provided by ProgramGen
        raise NotImplementedError

    def error_code(self, name: str, node: Any = None) -> int:  # pragma: no cover
        raise NotImplementedError

    def instantiate(self, inst: A.InstantiationDecl, prefix: str,
                    scope: dict[Any, str] | None = None,
                    action_scope: dict[Any, str] | None = None) -> str:  # pragma: no cover
        raise NotImplementedError

    def _params(self, decl: Any) -> tuple[list[str], list[Any]]:
        return [self.fresh("p_" + p.name) for p in decl.params], list(decl.params)

    def compile_parser(self, decl: A.ParserDecl, instance: str,
                       consts: dict[Any, str] | None = None, *, top: bool = False) -> str:
        fn = self.fresh("P_" + instance)
        scope: dict[Any, str] = dict(consts or {})
        pnames, params = self._params(decl)
        outs = []
        for pn, p in zip(pnames, params):
            scope[p] = pn
            if p.direction in (A.Direction.OUT, A.Direction.INOUT) and not is_object_type(p.type_ref.type) \
                    and not isinstance(strip(p.type_ref.type), T.ExternType):
                outs.append(pn)
        b = BodyCompiler(self, block=instance, scopes=[{}, scope, self.globals_], outs=outs)
        b.emit("tr = PK.trace")
        if not top:
            invalidate_outs(b, params, pnames)
        for loc in decl.locals:
            if isinstance(loc, A.ValueSetDecl):
                low = self.lowered.at(instance, loc)
                fq = low.name
                vs = ValueSet(name=fq, size=low.size, width=low.width)
                g = self.fresh("VS_" + fq)
                self.env[g] = vs
                self.value_sets[fq] = vs
                scope[loc] = g
            elif isinstance(loc, A.InstantiationDecl):
                self.instantiate(loc, instance, scope)
            else:
                b.stmt(loc)
        states = list(decl.states)
        index = {s: i for i, s in enumerate(states)}
        for name, s in decl.builtin_states.items():
            index[s] = -1 if name == "accept" else -2
        start = next((s for s in states if s.name == "start"), None)
        if start is None:
            raise CompileError(f"{decl.loc}: parser {decl.name} has no start state")
        b.emit(f"st = {index[start]}")
        b.emit("while True:")
        b.indent += 1
        for i, s in enumerate(states):
            b.emit(f"{'if' if i == 0 else 'elif'} st == {index[s]}:")
            b.indent += 1
            b.emit(f"if tr is not None: tr.append(TE('parser_state', {instance!r}, {{'state': {s.name!r}}}))")
            for stmt in s.statements:
                b.stmt(stmt)
            self._transition(b, s, index)
            b.indent -= 1
        b.emit(f"{'if' if not states else 'elif'} st == -1:")
        b.emit("    " + b.return_line())
        b.emit("else:")
        b.emit("    raise _perr(-1)")
        b.indent -= 1
        self.src.append(f"def {fn}({', '.join(pnames)}):\n" + "\n".join(b.lines) + "\n")
        return fn

    def _state_index(self, target: A.PathExpression, index: dict[Any, int]) -> int:
        d = target.decl
        if d in index:
            return index[d]
        if target.name == "accept":
            return -1
        if target.name == "reject":
            return -2
        raise CompileError(f"{target.loc}: transition to unknown state {target.name}")

    def _transition(self, b: BodyCompiler, s: A.ParserState, index: dict[Any, int]) -> None:
        tr = s.transition
        if tr is None:
            b.emit("st = -2")
            return
        if isinstance(tr, A.PathExpression):
            b.emit(f"st = {self._state_index(tr, index)}")
            return
        keys = []
        for k in tr.keys:
            code = b.ex(k)
            kind, w = scalar_kind(k.type)
            if kind == "b":
                code = f"int({code})"
            elif kind == "s":
                code = f"({code} & {(1 << w) - 1})"
            v = b.tmp("s")
            b.emit(f"{v} = {code}")
            keys.append((v, k))
        first = True
        for case in tr.cases:
            conds = []
            keysets = case.keysets
            if len(keysets) == 1 and len(keys) > 1:
                ks0 = keysets[0]
                if isinstance(ks0, A.ValueKeyset) and isinstance(getattr(ks0.expr, "decl", None),
                                                                 A.ValueSetDecl):
                    # a value_set of a struct over several keys: its members are the
                    # keys' values concatenated in order (first key most significant)
                    cat = "0"
                    for v, k in keys:
                        cat = f"(({cat}) << {width_of(k.type)}) | {v}"
                    b.emit(f"{'if' if first else 'elif'} {b.ex(ks0.expr)}.match({cat}):")
                    b.emit(f"    st = {self._state_index(case.next_state, index)}")
                    first = False
                    continue
                if isinstance(ks0, A.DefaultKeyset):
                    keysets = keysets * len(keys)
                elif isinstance(ks0, A.ValueKeyset) and isinstance(ks0.expr, A.ListExpression):
                    keysets = [A.ValueKeyset(expr=x, loc=ks0.loc) for x in ks0.expr.elems]
            for (v, k), ks in zip(keys, keysets):
                c = self._keyset_cond(b, v, ks)
                if c != "True":
                    conds.append(c)
            cond = " and ".join(conds) or "True"
            b.emit(f"{'if' if first else 'elif'} {cond}:")
            b.emit(f"    st = {self._state_index(case.next_state, index)}")
            first = False
        if first:
            b.emit(f"raise _perr({self.error_code('NoMatch')})")
        else:
            b.emit("else:")
            b.emit(f"    raise _perr({self.error_code('NoMatch')})")

    def _keyset_cond(self, b: BodyCompiler, v: str, ks: Any) -> str:
        if isinstance(ks, A.DefaultKeyset):
            return "True"
        if isinstance(ks, A.MaskKeyset):
            val, mask = ks.value.const_value, ks.mask.const_value
            if isinstance(val, int) and isinstance(mask, int):
                return f"({v} & {mask}) == {val & mask}"
            return f"({v} & {b.ex(ks.mask)}) == ({b.ex(ks.value)} & {b.ex(ks.mask)})"
        if isinstance(ks, A.RangeKeyset):
            return f"{b.ex(ks.lo)} <= {v} <= {b.ex(ks.hi)}"
        if isinstance(ks, A.ValueKeyset):
            d = getattr(ks.expr, "decl", None)
            if isinstance(d, A.ValueSetDecl):
                return f"{b.ex(ks.expr)}.match({v})"
            return f"{v} == {b.ex(ks.expr)}"
        raise b.fail(ks, f"keyset {type(ks).__name__}")
