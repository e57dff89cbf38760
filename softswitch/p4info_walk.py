"""Which objects of a program P4Info describes, under which names and in which order,
as p4c decides it.

p4c writes P4Info from the output of its front end, which has reshaped the program:

- sub-controls are inlined into the controls of ``main``: an instance's declarations
  where the instance is declared (those of its constructor-argument controls first), a
  direct invocation's (``C.apply()``) after the control's own declarations;
- an action called from another action is inlined into its caller; one reached only
  that way is then unused and removed, so it is not listed;
- every use of an action gets its own copy under the same control-plane name: one for
  each table listing it, one for each call from an apply block; a top-level action
  (``NoAction``) is first copied into each control that uses it, before the control's
  own declarations;
- a copy called from an apply block has all its arguments bound at the call, so all its
  parameters become local variables: it has no parameters left; a table's copy keeps
  its action-data (directionless) parameters;
- a table without ``default_action`` gets ``NoAction`` as its default, added to its
  actions as ``@defaultonly`` when it is not there;
- ``@hidden`` tables and actions are left out;
- what nothing uses is dropped: a table never applied (and the actions only it
  names), code under a constant false condition, a direct counter or meter no table
  names (an extern instance stays, used or not).

The serializer then lists each control's actions in declaration order (copies of
top-level actions first) and keeps the first of each name.  So a table action has its
action-data parameters, an action used only from apply blocks is listed without any,
one called only from other actions is absent, and so are the extern functions
(``digest``) called only from actions that are absent.  P4Runtime only binds parameters
of table actions (entries, default actions, action-profile members), so the dropped
parameters are never on the wire.  Names are the lowering's (p4c's rules, in
``softswitch.lowering.names``): ``Block.local`` for declarations inside a parser/control
(``@name("x")`` replaces the local part, ``@name(".x")`` gives the global name ``x``),
top-level actions keep their plain name (``NoAction``).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.errors import P4Error
from softswitch.lowering import LoweredBlock, LoweredProgram
from softswitch.lowering.names import control_plane_name


class P4InfoError(P4Error):
    """The program cannot be described in P4Info (e.g. an @id used twice)."""


@dataclass(slots=True, kw_only=True)
class Symbol:
    """One P4Info object: its kind, control-plane name and declaration."""

    kind: str
    name: str
    decl: Any
    user_id: int | None
    id: int = 0
    order: int = 0  # place in p4c's listing of its kind (tables, actions)
    extra: dict[str, Any] = field(default_factory=dict)


def ann_string(decl: Any, name: str) -> str | None:
    ann = A.find_annotation(getattr(decl, "annotations", []), name)
    if ann is None or not ann.args or not isinstance(ann.args[0], A.StringLiteral):
        return None
    return ann.args[0].value


def _ann_id(decl: Any) -> int | None:
    ann = A.find_annotation(getattr(decl, "annotations", []), "id")
    if ann is None or not ann.args:
        return None
    v = ann.args[0]
    if not isinstance(v, A.IntLiteral):
        raise P4InfoError(ann.loc, "@id needs an integer argument")
    return v.value


def _hidden(decl: Any) -> bool:
    """``@hidden`` objects are left out of P4Info (their uses still count)."""
    return A.find_annotation(getattr(decl, "annotations", []), "hidden") is not None


def _live(root: Any) -> Iterator[Any]:
    """The nodes under ``root`` in source order, without the branches a constant condition
    never takes (``if (false)``, ``true ? a : b``): p4c folds them away before it drops
    what nothing uses."""
    dead: set[int] = set()
    for node in A.iter_nodes(root):
        if id(node) in dead:
            continue
        if isinstance(node, (A.IfStatement, A.TernaryExpression)) and isinstance(node.cond.const_value, bool):
            branch = node.else_ if node.cond.const_value else node.then
            if branch is not None:
                dead.update(id(n) for n in A.iter_nodes(branch))
        yield node


def _calls(body: A.BlockStatement) -> Iterator[A.MethodCallExpression]:
    """The calls in ``body`` in source order, with the bodies of the functions it calls
    in place (p4c inlines functions too)."""
    for node in _live(body):
        if isinstance(node, A.MethodCallExpression):
            yield node
            if node.call_kind == A.CallKind.FUNCTION and isinstance(node.callee_decl, A.FunctionDecl):
                yield from _calls(node.callee_decl.body)


@dataclass(slots=True)
class _ActionUse:
    name: str
    decl: A.ActionDecl
    from_apply: bool  # called from an apply block: p4c's copy has no parameters


# a control instance reached in an apply block: its type, name and constructor-argument controls
_Instance = tuple[A.ControlDecl, str, dict[int, Any]]


class Collector:
    """Walks the blocks of ``main`` and collects the P4Runtime objects; every name is
    the lowering's (``lowered``), the one the runtime and both back ends use."""

    def __init__(self, prog: A.CheckedProgram, lowered: LoweredProgram) -> None:
        self.prog = prog
        self.lowered = lowered
        self.symbols: list[Symbol] = []
        self.struct_types: dict[str, T.StructLikeType] = {}
        # p4c writes an (empty) type_info once it meets a table (@hidden ones too), an
        # extern instance or a control calling an extern function, whatever else it lists
        self.writes_type_info = False
        self._applied_tables: set[tuple[int, str]] = set()  # (table, prefix); p4c drops the others

    def add(self, kind: str, name: str, decl: Any, **extra: Any) -> Symbol:
        for s in self.symbols:
            if (s.kind, s.name) == (kind, name):
                if s.decl is not decl and decl is not None:
                    # two declarations under one control-plane name (`@name("a")` on two
                    # actions): one P4Info object, the first, as p4c makes it
                    s.extra.setdefault("aliases", []).append(decl)
                return s
        sym = Symbol(kind=kind, name=name, decl=decl, user_id=_ann_id(decl), extra=extra,
                     order=sum(1 for s in self.symbols if s.kind == kind))
        self.symbols.append(sym)
        return sym

    def run(self) -> None:
        main = self.prog.main
        if main is None:
            raise P4InfoError(None, "the program has no 'main' package instance")
        # top-level extern instances used by the pipeline keep their plain names
        used: set[int] = set()
        for blk in main.blocks:
            for node in A.iter_nodes(blk.decl):
                if isinstance(node, A.PathExpression) and node.decl is not None:
                    used.add(id(node.decl))
        for d in self.prog.program.declarations:
            if isinstance(d, A.InstantiationDecl) and id(d) in used:
                self.instance(d, "")
        for blk in main.blocks:
            prefix = self.lowered.blocks[blk.param].name
            if isinstance(blk.decl, A.ControlDecl):
                self.control(blk.decl, prefix)
            else:
                self.parser(blk.decl, prefix)
        # a direct counter or meter no table names is not described (p4c lists them with
        # the tables they belong to)
        named = {id(getattr(p.value, "decl", None)) for s in self.symbols if s.kind == "table"
                 for p in s.decl.properties if p.name in ("counters", "meters")}
        self.symbols = [s for s in self.symbols
                        if s.kind not in ("direct_counter", "direct_meter") or id(s.decl) in named]
        for d in self.prog.program.declarations:
            if isinstance(d, A.HeaderDecl) and A.find_annotation(d.annotations, "controller_header"):
                # p4c hashes the header type's name; the P4Info name is the annotation's
                shown = ann_string(d, "controller_header") or d.name
                self.add("controller_header", control_plane_name(d, ""), d, display_name=shown)

    def parser(self, p: A.ParserDecl, prefix: str) -> None:
        for d in p.locals:
            if isinstance(d, A.ValueSetDecl):
                self.add("value_set", self.lowered.at(prefix, d).name, d)
            elif isinstance(d, A.InstantiationDecl) and isinstance(d.type_decl, A.ParserDecl):
                self.parser(d.type_decl, self._sub(prefix, d).name)

    # ------------------------------------------------------------------ controls
    def control(self, c: A.ControlDecl, prefix: str) -> None:
        """One control of ``main`` with its sub-controls inlined, as p4c sees it."""
        # the apply blocks first: they say which tables (and sub-controls) are used
        applied: list[_ActionUse] = []
        self._apply_block(c, prefix, {}, applied)
        uses: list[_ActionUse] = []
        declared: list[tuple[str, A.ActionDecl]] = []
        self._declarations(c, prefix, uses, declared)
        uses += applied
        # the copies p4c lists: top-level actions first (in order of first use), then the
        # control's own in declaration order; each copy is shaped by its first use
        first: dict[tuple[str, int], _ActionUse] = {}
        for u in uses:
            first.setdefault((u.name, id(u.decl)), u)
        top = [u for u in first.values() if self._is_top_level(u.decl)]
        own = [first[(n, id(d))] for n, d in declared if (n, id(d)) in first]
        for u in top + own:
            if not _hidden(u.decl):
                self.add("action", u.name, u.decl, from_apply=u.from_apply)
        seen: set[int] = set()
        for u in uses:
            self._action_externs(u.decl, seen)

    def _is_top_level(self, a: A.ActionDecl) -> bool:
        return self.prog.top_level.get(a.name) is a

    def action_name(self, a: A.ActionDecl, prefix: str) -> str:
        return self.lowered.action(prefix, a).name

    def _sub(self, prefix: str, node: Any) -> LoweredBlock:
        """The lowered instance `node` (an instantiation, or a direct call's callee) makes
        inside instance `prefix`."""
        got = self.lowered.at(prefix, node)
        assert isinstance(got, LoweredBlock), (prefix, node)
        return got

    def _declarations(self, c: A.ControlDecl, prefix: str, uses: list[_ActionUse],
                      declared: list[tuple[str, A.ActionDecl]]) -> None:
        """The declarations of ``c`` in the order p4c's inlining leaves them."""
        for d in c.locals:  # a table applied in another table's key is applied too
            if isinstance(d, A.TableDecl):
                self._note_table_applies(d.keys, prefix)
        for d in c.locals:
            if isinstance(d, A.InstantiationDecl) and isinstance(d.type_decl, A.ControlDecl):
                sub = self._sub(prefix, d)
                for pname, inner in self._ctor_controls(d.type_decl, d).values():
                    made = sub.ctor_args[pname]
                    self._declarations(inner, made.name, uses, declared)
                self._declarations(d.type_decl, sub.name, uses, declared)
            elif isinstance(d, A.InstantiationDecl):
                self.instance(d, prefix)
            elif isinstance(d, A.TableDecl):
                self.table(d, prefix, uses)
            elif isinstance(d, A.ActionDecl):
                declared.append((self.action_name(d, prefix), d))
        for node in _live(c.body):
            if not isinstance(node, A.MethodCallExpression) or node.call_kind != A.CallKind.CONTROL_APPLY:
                continue
            callee = node.callee
            target = getattr(callee.expr, "decl", None) if isinstance(callee, A.MemberExpression) else None
            if isinstance(target, A.ControlDecl) and isinstance(callee, A.MemberExpression):
                self._declarations(target, self._sub(prefix, callee.expr).name, uses, declared)

    @staticmethod
    def _ctor_controls(c: A.ControlDecl, d: A.InstantiationDecl) -> dict[int, tuple[str, A.ControlDecl]]:
        """Controls made in place as constructor arguments (``C(Inner()) c;``), by parameter."""
        out = {}
        for p, a in zip(c.ctor_params, d.args):
            v = a.value
            if isinstance(v, A.MethodCallExpression) and v.call_kind is A.CallKind.CONSTRUCTOR \
                    and isinstance(v.callee_decl, A.ControlDecl):
                out[id(p)] = (p.name, v.callee_decl)
        return out

    def _apply_block(self, c: A.ControlDecl, prefix: str, bound: dict[int, Any],
                     uses: list[_ActionUse]) -> None:
        """Action and extern-function calls of ``c``'s apply block, sub-controls' apply
        blocks inlined where they are applied."""
        for node in _calls(c.body):
            if node.call_kind == A.CallKind.ACTION:
                uses.append(_ActionUse(self.action_name(node.callee_decl, prefix), node.callee_decl, True))
            elif node.call_kind == A.CallKind.CONTROL_APPLY:
                inner = self._applied(node, prefix, bound)
                if inner is not None:
                    self._apply_block(*inner, uses)
            elif node.call_kind == A.CallKind.EXTERN_FUNCTION:
                self.extern_function(node)
        self._note_table_applies(c.body, prefix)

    def _note_table_applies(self, root: Any, prefix: str) -> None:
        for node in _live(root):
            if isinstance(node, A.MethodCallExpression) and node.call_kind == A.CallKind.TABLE_APPLY \
                    and isinstance(node.callee, A.MemberExpression):
                self._applied_tables.add((id(getattr(node.callee.expr, "decl", None)), prefix))

    def _applied(self, call: A.MethodCallExpression, prefix: str, bound: dict[int, Any]) -> _Instance | None:
        callee = call.callee
        target = getattr(callee.expr, "decl", None) if isinstance(callee, A.MemberExpression) else None
        if isinstance(target, A.ControlDecl) and isinstance(callee, A.MemberExpression):
            return target, self._sub(prefix, callee.expr).name, {}
        if isinstance(target, A.InstantiationDecl) and isinstance(target.type_decl, A.ControlDecl):
            sub = self._sub(prefix, target)
            inner: dict[int, Any] = {pid: (c, sub.ctor_args[pname].name, {}) for pid, (pname, c)
                                     in self._ctor_controls(target.type_decl, target).items()}
            return target.type_decl, sub.name, inner
        if isinstance(target, A.Parameter):
            got: _Instance | None = bound.get(id(target))
            return got
        return None

    def _action_externs(self, a: A.ActionDecl, seen: set[int]) -> None:
        """Extern functions an action calls, directly or through the actions it calls
        (inlined into it by p4c)."""
        if id(a) in seen:
            return
        seen.add(id(a))
        for node in _calls(a.body):
            if node.call_kind == A.CallKind.ACTION:
                self._action_externs(node.callee_decl, seen)
            elif node.call_kind == A.CallKind.EXTERN_FUNCTION:
                self.extern_function(node)

    def extern_function(self, call: A.MethodCallExpression) -> None:
        self.writes_type_info = True
        if call.callee_decl.name != "digest":
            return
        t = call.type_bindings.get("T")
        if t is None and len(call.args) == 2:
            t = call.args[1].value.type
        if not isinstance(t, T.StructLikeType) or not t.name:
            raise P4InfoError(call.loc, "digest data must have a named struct type, e.g. digest<my_digest_t>(...)")
        self.struct_types[t.name] = t
        self.add("digest", t.name, self.prog.top_level.get(t.name), type=t)

    def instance(self, d: A.InstantiationDecl, prefix: str) -> None:
        td = d.type_decl
        if not isinstance(td, A.ExternDecl):
            return
        self.writes_type_info = True  # p4c does for any extern instance it meets
        kinds = {"counter": "counter", "direct_counter": "direct_counter", "meter": "meter",
                 "direct_meter": "direct_meter", "register": "register",
                 "action_profile": "action_profile", "action_selector": "action_profile"}
        if td.name in kinds:
            self.add(kinds[td.name], self.lowered.at(prefix, d).name, d)

    def table(self, t: A.TableDecl, prefix: str, uses: list[_ActionUse]) -> None:
        if (id(t), prefix) not in self._applied_tables:
            return  # never applied: p4c drops it, and with it its uses of actions
        low = self.lowered.table(prefix, t)
        actions = [a.name for a in low.actions]
        uses.extend(_ActionUse(a.name, a.action.decl, False) for a in low.actions)
        default_only_noaction = None
        if low.default is not None and low.default.implicit:
            # p4c makes NoAction the default of a table that names none
            default_only_noaction = low.default.name
            if low.action(default_only_noaction) is None:
                uses.append(_ActionUse(default_only_noaction, low.default.action.decl, False))
        self.writes_type_info = True
        if _hidden(t):
            return
        default = None if low.default is None or low.default.implicit else low.default.name
        self.add("table", low.name, t, prefix=prefix, actions=actions, default=default,
                 implicit_default=default_only_noaction, lowered=low)
        impl = low.implementation
        if impl is not None and isinstance(impl.decl, A.MethodCallExpression):
            self.add("action_profile", impl.name, impl.decl)
