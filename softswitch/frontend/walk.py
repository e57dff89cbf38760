"""Walking the syntax tree: every node under a root, syntactic children only.

Why not follow every field: the checker adds back references (``.decl``,
``.callee_decl``, ``.params`` ...) that would turn the tree into a graph with cycles.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_SKIP_FIELDS = frozenset({"loc", "type", "decl", "callee_decl", "type_bindings", "const_value",
                          "builtin_states", "type_decl", "ctor"})
# ``params`` is syntax on declarations but a back reference on these two
_PARAMS_ARE_LINKS = frozenset({"MethodCallExpression", "ActionRef"})


def iter_nodes(root: Any) -> Iterator[Any]:
    """Every syntax node under ``root`` (pre-order), following only syntactic children
    (never the checker's back references such as ``.decl``)."""
    stack: list[Any] = [root]
    while stack:
        n = stack.pop()
        if hasattr(n, "__dataclass_fields__") and hasattr(n, "loc"):
            yield n
            kids = []
            for name in n.__dataclass_fields__:  # type: ignore[attr-defined]
                if name in _SKIP_FIELDS or (name == "params" and type(n).__name__ in _PARAMS_ARE_LINKS):
                    continue
                kids.append(getattr(n, name))
            stack.extend(reversed(kids))
        elif isinstance(n, (list, tuple)):
            stack.extend(reversed(n))
        elif isinstance(n, dict):
            stack.extend(reversed(list(n.values())))


# what `walk` does not follow: back references, types, and where the checker keeps
# declarations it resolved (walking a body must not wander into other declarations)
_WALK_SKIP = frozenset({"decl", "callee_decl", "params", "type", "loc", "type_decl", "ctor",
                        "const_value", "annotations"})


def walk(node: Any) -> Iterator[Any]:
    """Every syntax node under `node` (itself included), depth first in source order,
    without annotations and parameter lists (the back ends' walk over bodies)."""
    from dataclasses import fields

    from softswitch.frontend import ast as A
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
            if f.name in _WALK_SKIP:
                continue
            v = getattr(n, f.name, None)
            if isinstance(v, (A.Node, list)):
                stack.append(v)
            elif isinstance(v, dict):
                stack.extend(x for x in v.values() if isinstance(x, A.Node))
