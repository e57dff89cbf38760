"""Parser state machines lowered: states, their statements, and each ``select``
normalised to one match per key.

Why normalise: the language lets a case write one keyset for several keys (``default``
for all of them, a tuple constant ``(1, 2)``, or a value set over the keys' values
concatenated); each back end used to unfold these its own way (and one did not unfold
tuples).  Here a case has one `LoweredMatch` per key, or names a value set that matches
all keys at once.  Values stay checked expressions (they need not be constants).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from softswitch.frontend import ast as A


@dataclass(slots=True, kw_only=True)
class LoweredMatch:
    """How one select key is matched: ``default`` (anything), ``value`` (equal to
    `a`), ``mask`` (``key & b == a & b``), ``range`` (``a <= key <= b``) or
    ``value_set`` (`a` names the set; its ``match`` decides)."""

    kind: str
    node: A.Keyset
    a: A.Expression | None = None
    b: A.Expression | None = None


@dataclass(slots=True, kw_only=True)
class LoweredCase:
    """One select case: a match per key, or `value_set` (a set over all the keys, whose
    members are the keys' values concatenated, the first key most significant)."""

    matches: list[LoweredMatch]
    next_state: A.PathExpression
    node: A.SelectCase
    value_set: A.Expression | None = None


@dataclass(slots=True, kw_only=True)
class LoweredState:
    """A parser state: its statements (checked syntax) and where it goes next: to
    `next_state`, or by `select` over `keys` and `cases` (neither: reject)."""

    name: str
    decl: A.ParserState
    next_state: A.PathExpression | None = None
    keys: list[A.Expression] = field(default_factory=list)
    cases: list[LoweredCase] = field(default_factory=list)

    @property
    def is_select(self) -> bool:
        return isinstance(self.decl.transition, A.SelectExpression)


def _is_value_set(ks: A.Keyset) -> bool:
    return isinstance(ks, A.ValueKeyset) and isinstance(getattr(ks.expr, "decl", None), A.ValueSetDecl)


def lower_match(ks: A.Keyset) -> LoweredMatch:
    if isinstance(ks, A.DefaultKeyset):
        return LoweredMatch(kind="default", node=ks)
    if isinstance(ks, A.MaskKeyset):
        return LoweredMatch(kind="mask", node=ks, a=ks.value, b=ks.mask)
    if isinstance(ks, A.RangeKeyset):
        return LoweredMatch(kind="range", node=ks, a=ks.lo, b=ks.hi)
    if isinstance(ks, A.ValueKeyset):
        return LoweredMatch(kind="value_set" if _is_value_set(ks) else "value", node=ks, a=ks.expr)
    return LoweredMatch(kind=type(ks).__name__, node=ks)   # a back end refuses it, located


def lower_case(case: A.SelectCase, nkeys: int) -> LoweredCase:
    keysets = case.keysets
    if len(keysets) == 1 and nkeys > 1:
        ks0 = keysets[0]
        if _is_value_set(ks0):
            assert isinstance(ks0, A.ValueKeyset)
            return LoweredCase(matches=[], next_state=case.next_state, node=case, value_set=ks0.expr)
        if isinstance(ks0, A.DefaultKeyset):
            keysets = keysets * nkeys
        elif isinstance(ks0, A.ValueKeyset) and isinstance(ks0.expr, A.ListExpression):
            keysets = [A.ValueKeyset(expr=x, loc=ks0.loc) for x in ks0.expr.elems]
    return LoweredCase(matches=[lower_match(ks) for ks in keysets], next_state=case.next_state, node=case)


def lower_state(st: A.ParserState) -> LoweredState:
    tr = st.transition
    if isinstance(tr, A.SelectExpression):
        return LoweredState(name=st.name, decl=st, keys=list(tr.keys),
                            cases=[lower_case(c, len(tr.keys)) for c in tr.cases])
    return LoweredState(name=st.name, decl=st, next_state=tr)
