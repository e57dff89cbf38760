"""Small helpers over the checked syntax tree: walking, source text, names."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from softswitch.frontend import ast as A


def walk(node: Any) -> Iterator[Any]:
    """Every syntax node under `node` (itself included), depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(reversed(n))
            continue
        if not isinstance(n, A.Node):
            continue
        yield n
        for f in fields(n):
            if f.name in ("decl", "callee_decl", "params", "type", "loc", "type_decl", "ctor",
                          "const_value", "annotations"):
                continue
            v = getattr(n, f.name, None)
            if isinstance(v, (A.Node, list)):
                stack.append(v)
            elif isinstance(v, dict):
                stack.extend(x for x in v.values() if isinstance(x, A.Node))


def annotation_str(decl: Any, name: str) -> str | None:
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
    ``prefix.MyControl_1`` ... for later invocations there (compiler and P4Info agree)."""
    base = f"{prefix}.{type_name}"
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}_{n}"
