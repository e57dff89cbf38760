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
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.lowering import LoweredMatch, LoweredProgram, LoweredState
from softswitch.objects import RuntimeObjects


class ParserCompiler:
    """Mixin of ProgramGen: compiles parser declarations."""

    env: dict[str, Any]
    lowered: LoweredProgram
    globals_: dict[Any, str]
    objects: RuntimeObjects
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
                g = self.fresh("VS_" + fq)
                self.env[g] = self.objects.value_sets[fq]
                scope[loc] = g
            elif isinstance(loc, A.InstantiationDecl):
                self.instantiate(loc, instance, scope)
            else:
                b.stmt(loc)
        states = list(decl.states)
        lowered_states = self.lowered.states(decl)
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
            self._transition(b, lowered_states[i], index)
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

    def _transition(self, b: BodyCompiler, s: LoweredState, index: dict[Any, int]) -> None:
        if not s.is_select:
            if s.next_state is None:
                b.emit("st = -2")
            else:
                b.emit(f"st = {self._state_index(s.next_state, index)}")
            return
        keys = []
        for k in s.keys:
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
        for case in s.cases:
            if case.value_set is not None:
                # a value_set of a struct over several keys: its members are the
                # keys' values concatenated in order (first key most significant)
                cat = "0"
                for v, k in keys:
                    cat = f"(({cat}) << {width_of(k.type)}) | {v}"
                b.emit(f"{'if' if first else 'elif'} {b.ex(case.value_set)}.match({cat}):")
                b.emit(f"    st = {self._state_index(case.next_state, index)}")
                first = False
                continue
            conds = []
            for (v, k), m in zip(keys, case.matches):
                c = self._match_cond(b, v, m)
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

    def _match_cond(self, b: BodyCompiler, v: str, m: LoweredMatch) -> str:
        if m.kind == "default":
            return "True"
        assert m.a is not None
        if m.kind == "mask":
            assert m.b is not None
            val, mask = m.a.const_value, m.b.const_value
            if isinstance(val, int) and isinstance(mask, int):
                return f"({v} & {mask}) == {val & mask}"
            return f"({v} & {b.ex(m.b)}) == ({b.ex(m.a)} & {b.ex(m.b)})"
        if m.kind == "range":
            assert m.b is not None
            return f"{b.ex(m.a)} <= {v} <= {b.ex(m.b)}"
        if m.kind == "value_set":
            return f"{b.ex(m.a)}.match({v})"
        if m.kind == "value":
            return f"{v} == {b.ex(m.a)}"
        raise b.fail(m.node, f"keyset {m.kind}")
