"""Source-like text of expressions, as p4c prints them.

Why: P4Info names a match field after its key expression when it has no @name
(``hdr.ipv4.dstAddr``), and error messages and traces name expressions the same way,
so there is one function for both.
"""
from __future__ import annotations

from softswitch.frontend import ast as A


def expr_text(e: A.Expression) -> str:
    """Source-like text of a key expression (p4c's default match field name)."""
    if isinstance(e, A.PathExpression):
        return ("." if e.dot_prefix else "") + e.name
    if isinstance(e, A.MemberExpression):
        return f"{expr_text(e.expr)}.{e.member}"
    if isinstance(e, A.IndexExpression):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, A.SliceExpression):
        return f"{expr_text(e.expr)}[{e.hi_value}:{e.lo_value}]"
    if isinstance(e, A.MethodCallExpression):
        return f"{expr_text(e.callee)}({', '.join(expr_text(a.value) for a in e.args)})"
    if isinstance(e, A.IntLiteral):
        return e.text or str(e.value)
    if isinstance(e, A.CastExpression):
        return expr_text(e.expr)
    if isinstance(e, A.BinaryExpression):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    if isinstance(e, A.BoolLiteral):
        return "true" if e.value else "false"
    if isinstance(e, A.UnaryExpression):
        return f"{e.op}{expr_text(e.operand)}"
    if isinstance(e, A.TypeNameExpression):
        return getattr(e.type_ref, "name", "")
    return type(e).__name__
