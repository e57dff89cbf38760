"""Control-plane names: the one place that decides what an object is called in P4Info,
in the runtime API and in both back ends.

p4c's rules: a declaration inside a parser/control instance is ``Instance.local``;
``@name("x")`` replaces the local part, ``@name(".x")`` gives the global name ``x``;
top-level declarations keep their plain name (``NoAction``); a block of the main
package is named after its type (``MyIngress``, whatever ``@name`` it carries); the
anonymous instance of a direct invocation ``C.apply()`` inside ``P`` is ``P.C``, then
``P.C_1`` ... for later invocations there.
"""
from __future__ import annotations

from typing import Any

from softswitch.frontend import ast as A


def annotation_str(decl: Any, name: str) -> str | None:
    """The string (or constant) argument of annotation ``@name(...)`` of `decl`."""
    ann = A.find_annotation(getattr(decl, "annotations", []) or [], name)
    if ann is None:
        return None
    if ann.args:
        a = ann.args[0]
        if isinstance(a, A.StringLiteral):
            return a.value
        if a.const_value is not None:
            return str(a.const_value)
    return ann.raw.strip().strip('"') or None


def annotation_ints(decl: Any, name: str) -> list[int]:
    """The integer arguments of annotation ``@name(1, 2)`` (``@field_list(1)``)."""
    ann = A.find_annotation(getattr(decl, "annotations", []) or [], name)
    if ann is None:
        return []
    out = []
    for a in ann.args:
        v = a.const_value if a.const_value is not None else getattr(a, "value", None)
        if isinstance(v, int):
            out.append(int(v))
    if not out and ann.raw:
        for part in ann.raw.replace("(", "").replace(")", "").split(","):
            part = part.strip()
            if part:
                out.append(int(part, 0))
    return out


def control_plane_name(decl: Any, prefix: str) -> str:
    """Name as p4c gives it in P4Info: @name wins (a leading dot makes it global)."""
    n = annotation_str(decl, "name")
    if n is not None:
        if n.startswith("."):
            return n[1:]
        return f"{prefix}.{n}" if prefix else n
    return f"{prefix}.{decl.name}" if prefix else decl.name


def direct_instance_name(prefix: str, type_name: str, seen: dict[str, int]) -> str:
    """Control-plane name of the anonymous instance a direct invocation
    (``MyControl.apply()``) creates inside `prefix`: ``prefix.MyControl``, then
    ``prefix.MyControl_1`` ... for later invocations there (`seen` counts them)."""
    base = f"{prefix}.{type_name}"
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}_{n}"
