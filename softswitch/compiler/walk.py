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


def expr_text(e: Any) -> str:
    """P4 source-like text of an expression (used for key names in P4Info and traces)."""
    if isinstance(e, A.PathExpression):
        return e.name
    if isinstance(e, A.MemberExpression):
        return f"{expr_text(e.expr)}.{e.member}"
    if isinstance(e, A.IndexExpression):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, A.SliceExpression):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, A.IntLiteral):
        return e.text or str(e.value)
    if isinstance(e, A.BoolLiteral):
        return "true" if e.value else "false"
    if isinstance(e, A.MethodCallExpression):
        return f"{expr_text(e.callee)}({', '.join(expr_text(a.value) for a in e.args)})"
    if isinstance(e, A.BinaryExpression):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    if isinstance(e, A.UnaryExpression):
        return f"{e.op}{expr_text(e.operand)}"
    if isinstance(e, A.CastExpression):
        return f"({e.type or ''}){expr_text(e.expr)}"
    if isinstance(e, A.TypeNameExpression):
        t = e.type_ref
        return getattr(t, "name", str(getattr(t, "type", "")))
    return type(e).__name__


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
