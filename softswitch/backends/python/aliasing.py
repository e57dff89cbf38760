"""Which call arguments must really be copied in and out.

Compiled code passes a header, struct or stack bound to an ``out``/``inout`` parameter
as the object itself: the callee writes it in place, which is what copy-in/copy-out
gives as long as the callee reaches that storage only through the parameter.  It can
reach it another way when it is an action that names the variable the argument belongs
to (an action declared in a control sees the control's parameters and locals, and so do
the actions it calls), or when another out/inout argument of the same call belongs to
the same variable.  Then P4's copy-out at return overwrites what the callee wrote the
other way (``action a(inout H v) { h.f = 2; }`` called as ``a(h)`` leaves ``h.f`` as it
was), so such arguments are passed as copies and copied back.
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.python.exprs import is_object_type
from softswitch.frontend import ast as A


def _root(e: A.Expression) -> Any:
    """The declaration of the variable an lvalue belongs to (``h`` of ``h.eth[1]``)."""
    while isinstance(e, (A.MemberExpression, A.IndexExpression, A.SliceExpression)):
        e = e.expr
    return e.decl if isinstance(e, A.PathExpression) else None


def _names_reached(action: A.ActionDecl, seen: set[int]) -> set[int]:
    """Ids of the declarations ``action`` names, itself or through the actions it calls."""
    out: set[int] = set()
    if id(action) in seen:
        return out
    seen.add(id(action))
    for node in A.iter_nodes(action.body):
        if isinstance(node, A.PathExpression) and node.decl is not None:
            out.add(id(node.decl))
        elif isinstance(node, A.MethodCallExpression) and node.call_kind is A.CallKind.ACTION \
                and isinstance(node.callee_decl, A.ActionDecl):
            out |= _names_reached(node.callee_decl, seen)
    return out


def aliased_object_args(call: A.MethodCallExpression) -> set[int]:
    """Ids of the argument expressions of ``call`` to pass as copies (see module doc)."""
    action = call.callee_decl if call.call_kind is A.CallKind.ACTION else None
    return aliased_bound_args(call.params or [], [a.value for a in call.args], action)


def aliased_bound_args(params: list[Any], args: list[A.Expression], action: Any) -> set[int]:
    """Ids of the expressions in ``args`` (bound to ``params`` of ``action``, None when the
    callee is not an action) to pass as copies: also for the directional arguments a
    table's action list binds (``actions = { a(hdr) }``)."""
    written = []
    roots: list[int] = []  # of every out/inout argument (`in` ones are copied at the call)
    for p, a in zip(params, args):
        root = _root(a)
        direction = getattr(p, "direction", A.Direction.IN)
        if direction not in (A.Direction.OUT, A.Direction.INOUT) or root is None:
            continue
        roots.append(id(root))
        pt = getattr(getattr(p, "type_ref", None), "type", None) or a.type
        if is_object_type(pt):
            written.append((a, id(root)))
    if not written:
        return set()
    reached = _names_reached(action, set()) if isinstance(action, A.ActionDecl) else set()
    return {id(a) for a, root in written if root in reached or roots.count(root) > 1}
