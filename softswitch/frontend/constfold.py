"""Compile-time arithmetic with P4_16 semantics (wraparound, saturation, signedness).

Why separate: the same rules fold constants here and may be reused by the backend to
evaluate const entries; they are pure functions of Python ints and ``types`` objects.
"""
from __future__ import annotations

from . import types as T


def wrap(value: int, t: T.P4Type) -> int:
    """Reduce ``value`` to the range of ``t`` (two's complement for ``int<W>``)."""
    t = T.strip_newtype(t)
    if isinstance(t, T.SerEnumType):
        t = t.underlying
    if isinstance(t, T.BitsType):
        mask = (1 << t.width) - 1
        value &= mask
        if t.signed and t.width > 0 and value >> (t.width - 1):
            value -= 1 << t.width
        return value
    return value


def saturate(value: int, t: T.BitsType) -> int:
    if t.signed:
        lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    else:
        lo, hi = 0, (1 << t.width) - 1
    return max(lo, min(hi, value))


def fold_binary(op: str, a: int | bool, b: int | bool, t: T.P4Type) -> int | bool | None:
    """Fold ``a op b`` whose operands have (unified) type ``t``; None if not foldable
    (division by zero is left to the checker's error path)."""
    if op in ("&&", "||"):
        return (a and b) if op == "&&" else (a or b)
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    assert isinstance(a, int) and isinstance(b, int)
    base = T.strip_newtype(t)
    if op in ("|+|", "|-|") and isinstance(base, T.BitsType):
        return saturate(a + b if op == "|+|" else a - b, base)
    if op == "+" or op == "|+|":
        r = a + b
    elif op == "-" or op == "|-|":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        if b == 0:
            return None
        r = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    elif op == "%":
        if b == 0:
            return None
        r = abs(a) % abs(b) * (1 if a >= 0 else -1)
    elif op == "&":
        r = a & b
    elif op == "|":
        r = a | b
    elif op == "^":
        r = a ^ b
    elif op == "<<":
        r = a << b
    elif op == ">>":
        r = a >> b
    else:
        return None
    return wrap(r, t)


def concat(a: int, wa: int, b: int, wb: int) -> int:
    """``a ++ b`` on the raw (unsigned) bit patterns."""
    return ((a & ((1 << wa) - 1)) << wb) | (b & ((1 << wb) - 1))


def fits(value: int, t: T.BitsType) -> bool:
    if t.signed:
        return -(1 << (t.width - 1)) <= value < (1 << (t.width - 1))
    return 0 <= value < (1 << t.width)
