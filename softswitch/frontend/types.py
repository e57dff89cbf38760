"""Resolved P4_16 types, as the checker sets them on ``Expression.type`` / ``TypeRef.type``.

Why separate from the syntax tree: types are values (frozen, hashable, comparable with
``==``), shared by many nodes, and what a consumer needs to lay out data (widths,
field order, signedness) without looking at declarations again.

Reading guide for consumers:

* ``BitsType(width, signed)`` is ``bit<W>`` / ``int<W>``; ``bit_width(t)`` gives the
  serialised width of any fixed-width type (bits, bool, serializable enum, header,
  struct of fixed-width fields, new types over bits).
* ``IntType`` is the arbitrary-precision ``int`` of unsized literals and ``const int``.
* Headers/structs/unions keep ``fields`` in declaration order as ``(name, type)``.
* ``StackType(elem, size)`` is ``H[size]`` with ``elem`` a ``HeaderType`` or
  ``HeaderUnionType``.
* ``EnumType`` has members (names only); ``SerEnumType`` has ``underlying`` (a
  ``BitsType``) and ``members`` as ``(name, value)``.
* ``ErrorType()`` / ``MatchKindType()``: one type each per program (``members`` is
  left empty by the checker because ``error {...}`` declarations merge); the member
  names in order are ``CheckedProgram.errors`` / ``.match_kinds`` and an error's code
  is its position there (``NoError`` = 0).
* ``typedef`` is resolved away; ``type`` declarations give ``NewType(name, underlying)``.
* ``ExternType(name, args)`` is an extern instance type (e.g. ``register<bit<32>>``
  has ``args == (BitsType(32),)``); ``ParserType``/``ControlType``/``PackageType``
  name the block and its declaration-level type parameters.
* ``TableType(name)`` is the type of a table name; ``t.apply()`` has type
  ``ApplyResultType(table)``; ``t.apply().action_run`` has ``ActionEnumType(table)``.
* ``SetType(elem)`` is the type of a ``value_set``; ``TupleType`` of ``{a, b}`` lists.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class P4Type:
    """Base of all resolved types."""

    def __str__(self) -> str:  # pragma: no cover - overridden
        return type(self).__name__


@dataclass(slots=True, frozen=True)
class BitsType(P4Type):
    width: int
    signed: bool = False

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(slots=True, frozen=True)
class VarbitType(P4Type):
    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(slots=True, frozen=True)
class BoolType(P4Type):
    def __str__(self) -> str:
        return "bool"


@dataclass(slots=True, frozen=True)
class IntType(P4Type):
    """Arbitrary-precision integer (unsized literal, ``const int``)."""

    def __str__(self) -> str:
        return "int"


@dataclass(slots=True, frozen=True)
class StringType(P4Type):
    def __str__(self) -> str:
        return "string"


@dataclass(slots=True, frozen=True)
class VoidType(P4Type):
    def __str__(self) -> str:
        return "void"


@dataclass(slots=True, frozen=True)
class DontCareType(P4Type):
    """Type of ``_``: unifies with anything."""

    def __str__(self) -> str:
        return "_"


@dataclass(slots=True, frozen=True)
class ErrorType(P4Type):
    members: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "error"


@dataclass(slots=True, frozen=True)
class MatchKindType(P4Type):
    members: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "match_kind"


@dataclass(slots=True, frozen=True)
class StructLikeType(P4Type):
    name: str
    fields: tuple[tuple[str, P4Type], ...] = ()

    def field_type(self, name: str) -> P4Type | None:
        for fname, ftype in self.fields:
            if fname == name:
                return ftype
        return None

    def field_names(self) -> tuple[str, ...]:
        return tuple(f for f, _ in self.fields)

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class HeaderType(StructLikeType):
    pass


@dataclass(slots=True, frozen=True)
class HeaderUnionType(StructLikeType):
    pass


@dataclass(slots=True, frozen=True)
class StructType(StructLikeType):
    pass


@dataclass(slots=True, frozen=True)
class StackType(P4Type):
    elem: P4Type
    size: int

    def __str__(self) -> str:
        return f"{self.elem}[{self.size}]"


@dataclass(slots=True, frozen=True)
class EnumType(P4Type):
    name: str
    members: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class SerEnumType(P4Type):
    name: str
    underlying: BitsType
    members: tuple[tuple[str, int], ...] = ()

    def value(self, member: str) -> int:
        for name, val in self.members:
            if name == member:
                return val
        raise KeyError(member)

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class NewType(P4Type):
    """``type bit<9> PortId_t;`` — distinct from its underlying type."""

    name: str
    underlying: P4Type

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class TupleType(P4Type):
    elems: tuple[P4Type, ...] = ()

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(e) for e in self.elems) + ">"


@dataclass(slots=True, frozen=True)
class TypeVar(P4Type):
    """An unbound type parameter (only inside generic declarations)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class ExternType(P4Type):
    name: str
    args: tuple[P4Type, ...] = ()

    def __str__(self) -> str:
        if self.args:
            return f"{self.name}<{', '.join(str(a) for a in self.args)}>"
        return self.name


@dataclass(slots=True, frozen=True)
class ParserType(P4Type):
    name: str
    args: tuple[P4Type, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class ControlType(P4Type):
    name: str
    args: tuple[P4Type, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class PackageType(P4Type):
    name: str
    args: tuple[P4Type, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class TableType(P4Type):
    name: str

    def __str__(self) -> str:
        return f"table {self.name}"


@dataclass(slots=True, frozen=True)
class ApplyResultType(P4Type):
    """Result of ``t.apply()``: members ``hit``, ``miss`` (bool), ``action_run``."""

    table: str

    def __str__(self) -> str:
        return f"apply_result<{self.table}>"


@dataclass(slots=True, frozen=True)
class ActionEnumType(P4Type):
    """Type of ``t.apply().action_run``: one of the table's action names."""

    table: str
    actions: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"action_list<{self.table}>"


@dataclass(slots=True, frozen=True)
class ActionType(P4Type):
    name: str

    def __str__(self) -> str:
        return f"action {self.name}"


@dataclass(slots=True, frozen=True)
class FunctionType(P4Type):
    """Callee of a method call (extern method, function, action, built-in)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class StateType(P4Type):
    def __str__(self) -> str:
        return "state"


@dataclass(slots=True, frozen=True)
class SetType(P4Type):
    """``value_set<T>`` / keyset type."""

    elem: P4Type

    def __str__(self) -> str:
        return f"set<{self.elem}>"


@dataclass(slots=True, frozen=True)
class TypeOfType(P4Type):
    """A type name used as an expression prefix (``error`` in ``error.X``, an enum name)."""

    of: P4Type

    def __str__(self) -> str:
        return f"type {self.of}"


BOOL = BoolType()
INT = IntType()
STRING = StringType()
VOID = VoidType()
DONT_CARE = DontCareType()


def strip_newtype(t: P4Type) -> P4Type:
    """Underlying representation of a ``type``-declared name (recursively)."""
    while isinstance(t, NewType):
        t = t.underlying
    return t


def bit_width(t: P4Type) -> int:
    """Serialised width in bits of a fixed-width type; raises ValueError otherwise."""
    t = strip_newtype(t)
    if isinstance(t, BitsType):
        return t.width
    if isinstance(t, BoolType):
        return 1
    if isinstance(t, SerEnumType):
        return t.underlying.width
    if isinstance(t, VarbitType):
        return t.max_width
    if isinstance(t, StructLikeType):
        if isinstance(t, HeaderUnionType):
            return max((bit_width(ft) for _, ft in t.fields), default=0)
        return sum(bit_width(ft) for _, ft in t.fields)
    if isinstance(t, StackType):
        return t.size * bit_width(t.elem)
    raise ValueError(f"type {t} has no fixed bit width")


def is_header_like(t: P4Type) -> bool:
    return isinstance(t, (HeaderType, HeaderUnionType))


def is_integral(t: P4Type) -> bool:
    return isinstance(strip_newtype(t), (BitsType, IntType))
