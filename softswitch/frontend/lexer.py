"""Lexer feedback for the LALR grammar (the classic typedef-name problem of C-like languages).

P4, like C, cannot be parsed LALR(1) unless the lexer tells type names from other names
(``T x;`` versus ``a.b = c;``, ``(T) e`` versus ``(e)``).  The reference compiler asks its
symbol table; we make one pre-pass over the whole token list to collect every declared
type name (headers, structs, enums, typedefs, externs, parsers, controls, packages and
type parameters) and retype those identifiers as ``TYPE_IDENTIFIER``.  The same pass
marks a ``<`` that opens the type arguments of a call (``pkt.lookahead<bit<8>>()``) as
``L_TARGS``, the first ``>`` of an adjacent ``>>`` as ``R_ANGLE_SHIFT`` (so ``bit<bit<8>>``
closes twice while ``a >> b`` is a shift), and an ``extern`` that declares an object
type as ``EXTERN_OBJECT``.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from lark import Token

_TYPE_DECL_KW = frozenset({"header", "header_union", "struct", "parser", "control", "package"})
_TYPE_ARG_VALUES = frozenset({
    "<", ">", ",", "[", "]", ".", "(", ")", "_",
    "bit", "int", "varbit", "bool", "tuple", "void", "error", "string", "match_kind",
})


def _type_arg_token(tok: Token) -> bool:
    if tok.type in ("TYPE_IDENTIFIER", "INTEGER"):
        return True
    return tok.type not in ("IDENTIFIER", "STRING_LITERAL") and tok.value in _TYPE_ARG_VALUES


def _is_ident(tok: Token) -> bool:
    return tok.type == "IDENTIFIER"


def _kw(tok: Token | None, word: str) -> bool:
    return tok is not None and tok.type not in ("IDENTIFIER", "STRING_LITERAL") and tok.value == word


def _matching_close(toks: list[Token], i: int) -> int | None:
    """Index of the ``>`` closing the ``<`` at ``i`` (nesting counted), or None."""
    depth = 0
    for j in range(i, len(toks)):
        v = toks[j].value
        if v == "<":
            depth += 1
        elif v == ">":
            depth -= 1
            if depth == 0:
                return j
        elif v in (";", "{", "}", "=", "&&", "||", "?"):
            return None
    return None


def collect_type_names(toks: list[Token]) -> tuple[set[str], set[int]]:
    """Names declared as types anywhere, and indexes of ``extern`` tokens that declare
    extern object types."""
    types: set[str] = set()
    extern_objects: set[int] = set()
    n = len(toks)
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < n else None
        if tok.type == "IDENTIFIER" or tok.type == "STRING_LITERAL":
            # type parameters: Name<A, B>( or Name<A, B>{  (declarations)
            if nxt is not None and nxt.value == "<":
                close = _matching_close(toks, i + 1)
                if close is not None and close + 1 < n and toks[close + 1].value in ("(", "{"):
                    inner = toks[i + 2:close]
                    if inner and all(t.type == "IDENTIFIER" or t.value == "," for t in inner):
                        prev = toks[i - 1] if i > 0 else None
                        # only in declarations: preceded by a type/keyword, not by '.' or '='
                        if prev is None or prev.value not in (".", "=", "(", ",", "return"):
                            types.update(t.value for t in inner if t.type == "IDENTIFIER")
            continue
        val = tok.value
        if val in _TYPE_DECL_KW and nxt is not None and _is_ident(nxt):
            types.add(nxt.value)
            if val in ("parser", "control", "package", "header", "struct", "header_union"):
                _type_params_after(toks, i + 2, types)
        elif val == "extern" and nxt is not None and _is_ident(nxt):
            after = toks[i + 2] if i + 2 < n else None
            if after is not None and after.value == "{":
                types.add(nxt.value)
                extern_objects.add(i)
            elif after is not None and after.value == "<":
                close = _matching_close(toks, i + 2)
                if close is not None and close + 1 < n and toks[close + 1].value == "{":
                    types.add(nxt.value)
                    extern_objects.add(i)
                    _type_params_after(toks, i + 2, types)
        elif val == "enum":
            for j in range(i + 1, min(n, i + 40)):
                if toks[j].value == "{":
                    if _is_ident(toks[j - 1]):
                        types.add(toks[j - 1].value)
                    break
        elif val in ("typedef", "type"):
            prev = toks[i - 1] if i > 0 else None
            if val == "type" and prev is not None and prev.value not in (";", "}", ")"):
                continue
            for j in range(i + 1, min(n, i + 60)):
                if toks[j].value == ";":
                    if _is_ident(toks[j - 1]):
                        types.add(toks[j - 1].value)
                    break
    return types, extern_objects


def _type_params_after(toks: list[Token], i: int, types: set[str]) -> None:
    if i < len(toks) and toks[i].value == "<":
        close = _matching_close(toks, i)
        if close is not None:
            types.update(t.value for t in toks[i + 1:close] if t.type == "IDENTIFIER")


class TypeNameFilter:
    """lark ``postlex`` object implementing the retyping described in the module doc."""

    always_accept: tuple[str, ...] = ()

    def process(self, stream: Iterable[Token]) -> Iterator[Token]:
        toks = list(stream)
        types, extern_objects = collect_type_names(toks)
        out: list[Token] = []
        n = len(toks)
        for i, tok in enumerate(toks):
            followed_by_dot = i + 1 < n and toks[i + 1].value == "." and toks[i + 1].type != "STRING_LITERAL"
            if tok.type == "IDENTIFIER" and tok.value in types and not followed_by_dot:
                # 'X.y' stays a plain name: X may be a value named like a type; the
                # checker resolves it to an enum/type or a variable by scope
                tok = Token.new_borrow_pos("TYPE_IDENTIFIER", tok.value, tok)
            elif i in extern_objects:
                tok = Token.new_borrow_pos("EXTERN_OBJECT", tok.value, tok)
            elif tok.type == "RANGLE" and i + 1 < n and toks[i + 1].type == "RANGLE" \
                    and toks[i + 1].start_pos == tok.end_pos:
                tok = Token.new_borrow_pos("R_ANGLE_SHIFT", tok.value, tok)
            out.append(tok)
        # second pass: '<' opening a call's type arguments
        for i, tok in enumerate(out):
            if tok.type != "LANGLE" or i == 0:
                continue
            prev = out[i - 1]
            if prev.type not in ("IDENTIFIER", "APPLY"):
                continue
            close = _matching_close(out, i)
            if close is None or close + 1 >= n or out[close + 1].value != "(":
                continue
            if all(_type_arg_token(t) or t.type == "IDENTIFIER" and _inside_width(out, i, k)
                   for k, t in enumerate(out[i + 1:close], start=i + 1)):
                out[i] = Token.new_borrow_pos("L_TARGS", tok.value, tok)
        return iter(out)


def _inside_width(toks: list[Token], start: int, k: int) -> bool:
    """True when the identifier at ``k`` is a width like ``bit<W>`` (preceded by ``bit<``)."""
    return k >= 2 and toks[k - 1].value == "<" and toks[k - 2].value in ("bit", "int", "varbit")
