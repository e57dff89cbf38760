"""The lowered form: what a checked program instantiates, under which control-plane
names, as plain dataclasses both back ends and P4Info read.

Why a lowered form: the instance tree (which control instance holds which tables,
actions and extern instances, named how), the shape of every table (keys, actions,
defaults, const entries, direct resources, implementation) and the extern instances
are decided once here, from the program and its architecture, instead of once per
back end.  Statement and expression bodies stay the checked syntax tree (already
target-independent): the lowered nodes point at their declarations (``decl``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.lowering.parsers import LoweredState

ERROR_WIDTH = 32   # an error value is its code, 32 bits as BMv2's parser_error


def value_width(t: T.P4Type | None) -> int:
    """Bits of a value of type `t` in keys, action data and value sets (a clear error
    for a type without a bit representation)."""
    t = None if t is None else T.strip_newtype(t)
    if isinstance(t, T.SerEnumType):
        return t.underlying.width
    if isinstance(t, T.BitsType):
        return t.width
    if isinstance(t, T.BoolType):
        return 1
    if isinstance(t, T.ErrorType):
        return ERROR_WIDTH
    if t is None:
        raise CompileError("expression has no type")
    try:
        return T.bit_width(t)
    except ValueError as exc:
        raise CompileError(f"type {t} has no bit width") from exc


@dataclass(slots=True, kw_only=True)
class LoweredKey:
    """One key element of a table, as P4Info names it."""

    name: str               # ``@name`` or the expression's text (``hdr.ipv4.dstAddr``)
    match_kind: str         # exact | lpm | ternary | range | optional | an architecture's own
    expr: A.Expression      # the checked expression the back ends evaluate
    decl: A.KeyElement      # annotations, location

    @property
    def width(self) -> int:
        """Bits of the key value (an error is 32 bits, as BMv2's)."""
        return value_width(self.expr.type)


@dataclass(slots=True, kw_only=True)
class LoweredActionRef:
    """An action a table may run, by its control-plane name."""

    name: str
    action: LoweredAction
    ref: A.ActionRef        # the table's reference: bound directional arguments, annotations
    default_only: bool = False
    table_only: bool = False


@dataclass(slots=True, kw_only=True)
class LoweredDefault:
    """A table's default action with its action data (masked to the parameters' widths).
    `implicit`: the table names none, so it is ``NoAction`` (which it may not list)."""

    action: LoweredAction
    args: tuple[int, ...] = ()
    const: bool = False
    implicit: bool = False
    ref: A.ActionRef | None = None

    @property
    def name(self) -> str:
        return self.action.name


@dataclass(slots=True, kw_only=True)
class LoweredEntry:
    """A const (or initial) entry: match values of `softswitch.tables`, the action, its
    data and the priority on P4Runtime's scale (largest wins; 0 for tables without
    ternary/range/optional keys)."""

    key: list[Any]
    action: str
    args: list[int]
    priority: int
    decl: A.TableEntry


@dataclass(slots=True, kw_only=True)
class LoweredAction:
    """An action declaration as one control-plane object."""

    name: str
    decl: A.ActionDecl
    block: str                                   # the instance it belongs to ("" top level)

    @property
    def data_params(self) -> list[tuple[str, int]]:
        """The directionless parameters (the control plane's action data): (name, width)."""
        return [(p.name, value_width(p.type_ref.type)) for p in self.decl.params
                if p.direction is A.Direction.NONE]

    @property
    def directional(self) -> bool:
        return any(p.direction is not A.Direction.NONE for p in self.decl.params)


@dataclass(slots=True, kw_only=True)
class LoweredExtern:
    """An extern instance: ``counter(16, CounterType.packets) c;`` or the inline
    ``implementation = action_selector(...)`` of a table (named ``<table>_implementation``)."""

    type_name: str
    name: str
    decl: A.InstantiationDecl | A.MethodCallExpression
    args: list[A.Expression]
    type_args: list[T.P4Type] = field(default_factory=list)
    block: str = ""
    loc: A.SourceLoc | None = None

    def const_arg(self, i: int) -> int | None:
        """Argument `i` when it is a compile-time integer (a size), else None."""
        v = self.args[i].const_value if i < len(self.args) else None
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(slots=True, kw_only=True)
class LoweredValueSet:
    """A parser value set: its name, capacity and element width."""

    name: str
    decl: A.ValueSetDecl
    size: int

    @property
    def width(self) -> int:
        """Bits of an element (a struct's fields side by side)."""
        return value_width(self.decl.elem_type.type)


@dataclass(slots=True, kw_only=True)
class LoweredTable:
    """A table of one control instance."""

    name: str
    decl: A.TableDecl
    block: str
    keys: list[LoweredKey]                       # looked up (P4Info match fields)
    selector_keys: list[LoweredKey]              # hashed to pick a selector group's member
    actions: list[LoweredActionRef]
    default: LoweredDefault | None
    size: int                                    # capacity (1024 when not declared or 0)
    declared_size: int | None                    # the ``size`` property as written
    direct_counter: LoweredExtern | None = None
    direct_meter: LoweredExtern | None = None
    implementation: LoweredExtern | None = None
    entries_const: bool = False
    _entries: list[LoweredEntry] | None = None
    _lower_entries: Any = None

    @property
    def needs_priority(self) -> bool:
        """Entries carry priorities: ternary, range or optional keys, or several LPM ones."""
        kinds = [k.match_kind for k in self.keys]
        return any(k in ("ternary", "range", "optional") for k in kinds) or kinds.count("lpm") > 1

    def entries(self) -> list[LoweredEntry]:
        """The const/initial entries (lowered on first use: a back end may refuse the
        table before its entries are looked at)."""
        if self._entries is None:
            self._entries = self._lower_entries(self) if self._lower_entries is not None else []
        return self._entries

    def action(self, name: str) -> LoweredActionRef | None:
        return next((a for a in self.actions if a.name == name), None)


@dataclass(slots=True, kw_only=True, eq=False)
class LoweredBlock:
    """A parser or control instance: the node of the instance tree."""

    kind: str                                    # parser | control
    name: str                                    # control-plane prefix of what it declares
    decl: A.ParserDecl | A.ControlDecl
    ctor_args: dict[str, Any] = field(default_factory=dict)  # parameter -> LoweredBlock or constant
    instances: list[LoweredBlock] = field(default_factory=list)  # sub-parsers/controls
    actions: list[LoweredAction] = field(default_factory=list)
    tables: list[LoweredTable] = field(default_factory=list)
    externs: list[LoweredExtern] = field(default_factory=list)
    value_sets: list[LoweredValueSet] = field(default_factory=list)
    states: list[LoweredState] = field(default_factory=list)   # a parser's state machine

    def walk(self) -> list[LoweredBlock]:
        """This block and every instance under it, parents first."""
        out = [self]
        for b in self.instances:
            out += b.walk()
        return out


@dataclass(slots=True, kw_only=True, eq=False)
class LoweredProgram:
    """The whole program: the main package's blocks and indexes by instance and name."""

    checked: Any
    arch: Any
    errors: list[str]                            # error names in code order
    blocks: dict[str, LoweredBlock]              # the package's parameter -> top instance
    top_actions: dict[int, LoweredAction]        # id(ActionDecl) -> top-level action
    top_externs: dict[int, LoweredExtern]        # id(InstantiationDecl) -> top-level instance
    # (instance name, id(declaration or direct call's callee)) -> lowered object
    by_place: dict[tuple[str, int], Any] = field(default_factory=dict)
    parser_states: dict[int, list[LoweredState]] = field(default_factory=dict)  # id(ParserDecl) ->

    def states(self, decl: A.ParserDecl) -> list[LoweredState]:
        """The state machine of parser type `decl` (the same in each of its instances)."""
        return self.parser_states[id(decl)]

    # ------------------------------------------------------------ look-ups
    def at(self, block: str, node: Any) -> Any:
        """What `node` (a table, action, instantiation, value set, or the callee of a
        direct ``C.apply()``) lowered to inside instance `block`; None if nothing."""
        got = self.by_place.get((block, id(node)))
        if got is None and isinstance(node, A.ActionDecl):
            return self.top_actions.get(id(node))
        if got is None and isinstance(node, A.InstantiationDecl):
            return self.top_externs.get(id(node))
        return got

    def table(self, block: str, decl: A.TableDecl) -> LoweredTable:
        got = self.at(block, decl)
        assert isinstance(got, LoweredTable), (block, decl.name)
        return got

    def action(self, block: str, decl: A.ActionDecl) -> LoweredAction:
        got = self.at(block, decl)
        assert isinstance(got, LoweredAction), (block, decl.name)
        return got

    def instances(self) -> list[LoweredBlock]:
        """Every parser/control instance, the package's blocks first in pipeline order."""
        out: list[LoweredBlock] = []
        seen: set[int] = set()
        for b in self.blocks.values():
            for x in b.walk():
                if id(x) not in seen:
                    seen.add(id(x))
                    out.append(x)
        return out

    def tables(self) -> dict[str, LoweredTable]:
        """Every table of every instance, by control-plane name."""
        return {t.name: t for b in self.instances() for t in b.tables}

    def externs(self) -> dict[str, LoweredExtern]:
        """Every extern instance of the instances and the top level, by control-plane name."""
        out = {e.name: e for e in self.top_externs.values()}
        for b in self.instances():
            out.update((e.name, e) for e in b.externs)
            out.update((t.implementation.name, t.implementation) for t in b.tables
                       if t.implementation is not None and isinstance(t.implementation.decl, A.MethodCallExpression))
        return out
