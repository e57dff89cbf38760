"""P4_16 source text (already preprocessed) -> ``ast.Program``.

Why lark LALR: linear-time parsing (a few hundred lines in well under a second) with a
grammar file that follows the specification's grammar; the type-name lexer feedback it
needs is in ``lexer.py``.  The parser object is built once per process and cached on
first use (``get_parser``), never at import time.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from . import ast as A
from .errors import P4Error, P4SyntaxError, P4Unsupported
from .lexer import TypeNameFilter
from .preprocess import LineMap

_GRAMMAR = Path(__file__).with_name("p4.lark")


@functools.lru_cache(maxsize=1)
def get_parser() -> Lark:
    return Lark(
        _GRAMMAR.read_text(),
        parser="lalr",
        lexer="basic",
        postlex=TypeNameFilter(),
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,  # lark keeps the LALR tables in the temp dir, keyed by grammar hash
    )


_INT_RE = re.compile(r"^(?:(\d+)([ws]))?(.*)$")


def parse_int_literal(text: str) -> tuple[int, int | None, bool]:
    """``8w0x1F`` -> (31, 8, False); ``42`` -> (42, None, False)."""
    m = _INT_RE.match(text)
    assert m is not None
    width = int(m.group(1)) if m.group(1) else None
    signed = m.group(2) == "s"
    body = m.group(3).replace("_", "")
    low = body.lower()
    if low.startswith("0x"):
        value = int(body, 16)
    elif low.startswith("0b"):
        value = int(body, 2)
    elif low.startswith("0o"):
        value = int(body, 8)
    elif low.startswith("0d"):
        value = int(body[2:], 10)
    else:
        value = int(body, 10)
    return value, width, signed


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    return f"'{tok.value}'"


@v_args(meta=True)
class _Builder(Transformer):
    """Turns the lark tree into ``ast`` nodes (one method per grammar rule/alias)."""

    def __init__(self, linemap: LineMap) -> None:
        super().__init__(visit_tokens=False)
        self.lm = linemap

    # ---------------------------------------------------------------- helpers
    def _loc(self, meta: Any) -> A.SourceLoc:
        if getattr(meta, "empty", True):
            return A.UNKNOWN_LOC
        return self.lm.loc(int(meta.line), int(meta.column))

    @staticmethod
    def _anns(x: Any) -> list[A.Annotation]:
        return x if isinstance(x, list) else []

    # ---------------------------------------------------------------- program
    def start(self, meta, ch):
        return A.Program(declarations=[d for d in ch if d is not None], loc=self._loc(meta))

    def empty_decl(self, meta, ch):
        return None

    # ---------------------------------------------------------------- names
    def name(self, meta, ch):
        return str(ch[0])

    member = name
    type_decl_name = name

    def soft_keyword(self, meta, ch):
        return str(ch[0])

    soft_path = soft_keyword

    def annotation_name(self, meta, ch):
        return str(ch[0])

    def annotations(self, meta, ch):
        return list(ch)

    def annotation_plain(self, meta, ch):
        return A.Annotation(name=ch[0], loc=self._loc(meta))

    def annotation_args(self, meta, ch):
        return A.Annotation(name=ch[0], args=ch[1] or [], loc=self._loc(meta))

    def annotation_kv(self, meta, ch):
        return A.Annotation(name=ch[0], kv=dict(ch[1] or []), loc=self._loc(meta))

    def kv_list(self, meta, ch):
        return list(ch)

    def kv_pair(self, meta, ch):
        return (ch[0], ch[1])

    # ---------------------------------------------------------------- types
    def type_name(self, meta, ch):
        return A.NamedTypeRef(name=str(ch[0]), loc=self._loc(meta))

    def unknown_type(self, meta, ch):
        # an identifier where a type is expected: resolution reports "undeclared type"
        return A.NamedTypeRef(name=str(ch[0]), loc=self._loc(meta))

    def type_name_dot(self, meta, ch):
        return A.NamedTypeRef(name=str(ch[0]), dot_prefix=True, loc=self._loc(meta))

    def named_type(self, meta, ch):
        return ch[0]

    def specialized_type(self, meta, ch):
        return A.SpecializedTypeRef(base=ch[0], args=ch[2], loc=self._loc(meta))

    def stack_type(self, meta, ch):
        return A.StackTypeRef(elem=ch[0], size=ch[1], loc=self._loc(meta))

    def tuple_type(self, meta, ch):
        return A.TupleTypeRef(elems=ch[1], loc=self._loc(meta))

    def rangle(self, meta, ch):
        return None

    def type_arg_list(self, meta, ch):
        return list(ch)

    def void_type(self, meta, ch):
        return A.BaseTypeRef(name="void", loc=self._loc(meta))

    def dontcare_type(self, meta, ch):
        return A.BaseTypeRef(name="_", loc=self._loc(meta))

    def base_type(self, meta, ch):
        kw = str(ch[0])
        loc = self._loc(meta)
        if len(ch) == 1:
            if kw == "bit":
                return A.BitTypeRef(width=None, loc=loc)
            return A.BaseTypeRef(name=kw, loc=loc)
        width = ch[2]
        if kw == "varbit":
            return A.VarbitTypeRef(width=width, loc=loc)
        return A.BitTypeRef(width=width, signed=(kw == "int"), loc=loc)

    def width_int(self, meta, ch):
        return self.int_lit(meta, ch)

    def width_name(self, meta, ch):
        return A.PathExpression(name=str(ch[0]), loc=self._loc(meta))

    def type_params(self, meta, ch):
        return [c for c in ch[1:] if isinstance(c, str) and not isinstance(c, Token)]

    # ---------------------------------------------------------------- parameters
    def parameter_list(self, meta, ch):
        return [c for c in ch if c is not None]

    def parameter(self, meta, ch):
        anns = self._anns(ch[0])
        return A.Parameter(
            name=ch[3], annotations=anns, direction=ch[1] or A.Direction.NONE,
            type_ref=ch[2], default=ch[4], optional=A.find_annotation(anns, "optional") is not None,
            loc=self._loc(meta),
        )

    def direction(self, meta, ch):
        return A.Direction(str(ch[0]))

    def ctor_params(self, meta, ch):
        return ch[0]

    # ---------------------------------------------------------------- type declarations
    def _struct_like(self, cls, meta, ch):
        fields = [c for c in ch[3:] if isinstance(c, A.StructField)]
        if ch[2]:
            raise P4Unsupported(self._loc(meta), "generic header/struct declarations")
        return cls(name=ch[1], annotations=self._anns(ch[0]), fields=fields, loc=self._loc(meta))

    def header_decl(self, meta, ch):
        return self._struct_like(A.HeaderDecl, meta, ch)

    def header_union_decl(self, meta, ch):
        return self._struct_like(A.HeaderUnionDecl, meta, ch)

    def struct_decl(self, meta, ch):
        return self._struct_like(A.StructDecl, meta, ch)

    def struct_field(self, meta, ch):
        return A.StructField(name=ch[2], annotations=self._anns(ch[0]), type_ref=ch[1], loc=self._loc(meta))

    def enum_decl(self, meta, ch):
        return A.EnumDecl(name=ch[1], annotations=self._anns(ch[0]), members=ch[2], loc=self._loc(meta))

    def ser_enum_decl(self, meta, ch):
        members = [c for c in ch[3:] if isinstance(c, A.EnumMember)]
        return A.EnumDecl(name=ch[2], annotations=self._anns(ch[0]), members=members,
                          underlying=ch[1], loc=self._loc(meta))

    def ser_member(self, meta, ch):
        return A.EnumMember(name=ch[1], annotations=self._anns(ch[0]), value=ch[2], loc=self._loc(meta))

    def identifier_list(self, meta, ch):
        return list(ch)

    def enum_ident(self, meta, ch):
        return A.EnumMember(name=ch[1], annotations=self._anns(ch[0]), loc=self._loc(meta))

    def typedef_decl(self, meta, ch):
        return A.TypedefDecl(name=ch[2], annotations=self._anns(ch[0]), type_ref=ch[1], loc=self._loc(meta))

    def newtype_decl(self, meta, ch):
        return A.TypedefDecl(name=ch[2], annotations=self._anns(ch[0]), type_ref=ch[1],
                             is_newtype=True, loc=self._loc(meta))

    def error_decl(self, meta, ch):
        return A.ErrorDecl(name="error", members=ch[0], loc=self._loc(meta))

    def match_kind_decl(self, meta, ch):
        return A.MatchKindDecl(name="match_kind", members=ch[0], loc=self._loc(meta))

    # ---------------------------------------------------------------- externs, functions
    def function_proto(self, meta, ch):
        return (ch[0], ch[1], ch[2] or [], ch[3], self._loc(meta))

    def function_proto_void(self, meta, ch):
        return (A.BaseTypeRef(name="void", loc=self._loc(meta)), ch[0], ch[1] or [], ch[2], self._loc(meta))

    def extern_object(self, meta, ch):
        methods = [c for c in ch[4:] if isinstance(c, A.MethodDecl)]
        return A.ExternDecl(name=ch[2], annotations=self._anns(ch[0]), type_params=ch[3] or [],
                            methods=methods, loc=self._loc(meta))

    def extern_function(self, meta, ch):
        ret, name, tps, params, loc = ch[1]
        return A.ExternFunctionDecl(name=name, annotations=self._anns(ch[0]), return_type=ret,
                                    type_params=tps, params=params, loc=loc)

    def method_plain(self, meta, ch, abstract=False):
        ret, name, tps, params, loc = ch[1]
        return A.MethodDecl(name=name, annotations=self._anns(ch[0]), return_type=ret,
                            type_params=tps, params=params, is_abstract=abstract, loc=loc)

    def method_abstract(self, meta, ch):
        return self.method_plain(meta, ch, abstract=True)

    def method_ctor(self, meta, ch):
        return A.MethodDecl(name=ch[1], annotations=self._anns(ch[0]), return_type=None,
                            params=ch[2], is_constructor=True, loc=self._loc(meta))

    def function_decl(self, meta, ch):
        ret, name, tps, params, loc = ch[1]
        return A.FunctionDecl(name=name, annotations=self._anns(ch[0]), return_type=ret,
                              type_params=tps, params=params, body=ch[2], loc=loc)

    # ---------------------------------------------------------------- parsers
    def parser_type_decl(self, meta, ch):
        return A.ParserTypeDecl(name=ch[1], annotations=self._anns(ch[0]), type_params=ch[2] or [],
                                params=ch[3], loc=self._loc(meta))

    def parser_decl(self, meta, ch):
        rest = ch[5:]
        locals_ = [c for c in rest if isinstance(c, A.Declaration) and not isinstance(c, A.ParserState)]
        states = [c for c in rest if isinstance(c, A.ParserState)]
        return A.ParserDecl(name=ch[1], annotations=self._anns(ch[0]), type_params=ch[2] or [],
                            params=ch[3], ctor_params=ch[4] or [], locals=locals_, states=states,
                            loc=self._loc(meta))

    def value_set_decl(self, meta, ch):
        # [annotations, LANGLE, type_arg, rangle, size, name]
        return A.ValueSetDecl(name=ch[5], annotations=self._anns(ch[0]), elem_type=ch[2],
                              size=ch[4], loc=self._loc(meta))

    def parser_state(self, meta, ch):
        body = [c for c in ch[2:-1] if c is not None]
        return A.ParserState(name=ch[1], annotations=self._anns(ch[0]), statements=body,
                             transition=ch[-1], loc=self._loc(meta))

    def transition_direct(self, meta, ch):
        return A.PathExpression(name=ch[0], loc=self._loc(meta))

    def transition_select(self, meta, ch):
        return ch[0]

    def select_expression(self, meta, ch):
        return A.SelectExpression(keys=ch[0], cases=list(ch[1:]), loc=self._loc(meta))

    def select_case(self, meta, ch):
        ks = ch[0] if isinstance(ch[0], list) else [ch[0]]
        return A.SelectCase(keysets=ks, next_state=A.PathExpression(name=ch[1], loc=self._loc(meta)),
                            loc=self._loc(meta))

    def tuple_keyset(self, meta, ch):
        return [self._as_keyset(c) for c in ch]

    def _as_keyset(self, c):
        return c if isinstance(c, A.Keyset) else self.value_keyset(None, [c])

    def value_keyset(self, meta, ch):
        e = ch[0]
        if isinstance(e, A.DontCareExpression):
            return A.DefaultKeyset(is_dont_care=True, loc=e.loc)
        return A.ValueKeyset(expr=e, loc=e.loc)

    def default_keyset(self, meta, ch):
        return A.DefaultKeyset(loc=self._loc(meta))

    def mask_keyset(self, meta, ch):
        return A.MaskKeyset(value=ch[0], mask=ch[1], loc=self._loc(meta))

    def range_keyset(self, meta, ch):
        return A.RangeKeyset(lo=ch[0], hi=ch[1], loc=self._loc(meta))

    # ---------------------------------------------------------------- controls
    def control_type_decl(self, meta, ch):
        return A.ControlTypeDecl(name=ch[1], annotations=self._anns(ch[0]), type_params=ch[2] or [],
                                 params=ch[3], loc=self._loc(meta))

    def control_decl(self, meta, ch):
        locals_ = [c for c in ch[5:-1] if c is not None]
        return A.ControlDecl(name=ch[1], annotations=self._anns(ch[0]), type_params=ch[2] or [],
                             params=ch[3], ctor_params=ch[4] or [], locals=locals_, body=ch[-1],
                             loc=self._loc(meta))

    def package_type_decl(self, meta, ch):
        return A.PackageTypeDecl(name=ch[1], annotations=self._anns(ch[0]), type_params=ch[2] or [],
                                 params=ch[3], loc=self._loc(meta))

    def action_decl(self, meta, ch):
        return A.ActionDecl(name=ch[1], annotations=self._anns(ch[0]), params=ch[2], body=ch[3],
                            loc=self._loc(meta))

    def table_decl(self, meta, ch):
        t = A.TableDecl(name=ch[1], annotations=self._anns(ch[0]), loc=self._loc(meta))
        for prop in ch[2:]:
            kind, val = prop[0], prop[1:]
            if kind == "key":
                t.keys = val[0]
            elif kind == "actions":
                t.actions = val[0]
            elif kind == "entries":
                t.entries, t.entries_const = val[0], val[1]
                for e in t.entries:
                    e.is_const = e.is_const or val[1]
            else:
                p: A.TableProperty = val[0]
                if p.name == "default_action":
                    t.default_action = self._to_action_ref(p.value, p.annotations)
                    t.default_action_const = p.is_const
                elif p.name == "size":
                    t.size = p.value
                    t.properties.append(p)
                else:
                    t.properties.append(p)
        return t

    def _to_action_ref(self, e: A.Expression, anns: list[A.Annotation]) -> A.ActionRef:
        if isinstance(e, A.MethodCallExpression) and isinstance(e.callee, A.PathExpression):
            return A.ActionRef(name=e.callee, args=e.args, annotations=anns, has_parens=True, loc=e.loc)
        if isinstance(e, A.PathExpression):
            return A.ActionRef(name=e, annotations=anns, loc=e.loc)
        raise P4SyntaxError(e.loc, "default_action must name an action, optionally with arguments")

    def table_key(self, meta, ch):
        return ("key", list(ch))

    def table_actions(self, meta, ch):
        return ("actions", list(ch))

    def table_entries(self, meta, ch):
        return ("entries", [c for c in ch[2:] if isinstance(c, A.TableEntry)], ch[1] is not None)

    def table_prop(self, meta, ch):
        return ("prop", A.TableProperty(name=str(ch[2]), value=ch[3], is_const=ch[1] is not None,
                                        annotations=self._anns(ch[0]), loc=self._loc(meta)))

    def key_element(self, meta, ch):
        return A.KeyElement(expr=ch[0], match_kind=ch[1], annotations=self._anns(ch[2]), loc=self._loc(meta))

    def action_name(self, meta, ch):
        return A.PathExpression(name=ch[0], loc=self._loc(meta))

    def action_name_dot(self, meta, ch):
        return A.PathExpression(name=ch[0], dot_prefix=True, loc=self._loc(meta))

    def action_ref(self, meta, ch):
        loc = self._loc(meta)
        return A.ActionRef(name=ch[1], args=ch[2] or [],
                           annotations=self._anns(ch[0]), has_parens=ch[2] is not None, loc=loc)

    def entry(self, meta, ch):
        anns = self._anns(ch[0]) + self._anns(ch[5])
        ks = ch[3] if isinstance(ch[3], list) else [ch[3]]
        return A.TableEntry(keysets=ks, action=ch[4], priority=ch[2], is_const=ch[1] is not None,
                            annotations=anns, loc=self._loc(meta))

    def entry_priority(self, meta, ch):
        return ch[0]

    # ---------------------------------------------------------------- declarations
    def const_decl(self, meta, ch):
        return A.ConstDecl(name=ch[2], annotations=self._anns(ch[0]), type_ref=ch[1], value=ch[3],
                           loc=self._loc(meta))

    def variable_decl(self, meta, ch):
        return A.VariableDecl(name=ch[2], annotations=self._anns(ch[0]), type_ref=ch[1], init=ch[3],
                              loc=self._loc(meta))

    def instantiation(self, meta, ch):
        return A.InstantiationDecl(name=ch[3], annotations=self._anns(ch[0]), type_ref=ch[1], args=ch[2],
                                   loc=self._loc(meta))

    # ---------------------------------------------------------------- statements
    def assignment(self, meta, ch):
        return A.AssignmentStatement(lhs=ch[0], rhs=ch[1], loc=self._loc(meta))

    def compound_assignment(self, meta, ch):
        return self._compound(meta, ch[0], str(ch[1]), ch[2])

    def _compound(self, meta, lhs, op_tok: str, rhs):
        """`a op= b` becomes `a = a op b` sharing the one `a` node: the compiler saves
        run-time indexes of a target before a right side with side effects runs, so
        `s[f()].x += 1` calls `f` once, as the specification requires."""
        loc = self._loc(meta)
        value = A.BinaryExpression(op=op_tok[:-1], left=lhs, right=rhs, loc=loc)
        return A.AssignmentStatement(lhs=lhs, rhs=value, loc=loc)

    def method_call_statement(self, meta, ch):
        call = A.MethodCallExpression(callee=ch[0], type_args=ch[2] or [], args=ch[4], loc=self._loc(meta))
        return A.MethodCallStatement(call=call, loc=self._loc(meta))

    def lvalue_path(self, meta, ch):
        return ch[0]

    def path(self, meta, ch):
        return A.PathExpression(name=str(ch[0]), loc=self._loc(meta))

    def path_dot(self, meta, ch):
        return A.PathExpression(name=str(ch[0]), dot_prefix=True, loc=self._loc(meta))

    def if_statement(self, meta, ch):
        return A.IfStatement(cond=ch[0], then=ch[1], else_=ch[2], loc=self._loc(meta))

    def block(self, meta, ch):
        return A.BlockStatement(statements=[c for c in ch[1:] if c is not None],
                                annotations=self._anns(ch[0]), loc=self._loc(meta))

    def exit_statement(self, meta, ch):
        return A.ExitStatement(loc=self._loc(meta))

    def break_statement(self, meta, ch):
        return A.BreakStatement(loc=self._loc(meta))

    def continue_statement(self, meta, ch):
        return A.ContinueStatement(loc=self._loc(meta))

    def for_statement(self, meta, ch):
        return A.ForStatement(init=ch[1] or [], cond=ch[2], update=ch[3] or [], body=ch[4],
                              annotations=self._anns(ch[0]), loc=self._loc(meta))

    def for_in_statement(self, meta, ch):
        var = A.VariableDecl(name=ch[2], type_ref=ch[1], loc=self._loc(meta))
        return A.ForInStatement(var=var, collection=ch[3], hi=ch[4], body=ch[5],
                                annotations=self._anns(ch[0]), loc=self._loc(meta))

    def for_steps(self, meta, ch):
        return list(ch)

    def for_var(self, meta, ch):
        return A.VariableDecl(name=ch[1], type_ref=ch[0], init=ch[2], loc=self._loc(meta))

    def for_assign(self, meta, ch):
        return A.AssignmentStatement(lhs=ch[0], rhs=ch[1], loc=self._loc(meta))

    def for_compound(self, meta, ch):
        return self._compound(meta, ch[0], str(ch[1]), ch[2])

    def for_call(self, meta, ch):
        call = A.MethodCallExpression(callee=ch[0], type_args=ch[2] or [], args=ch[4], loc=self._loc(meta))
        return A.MethodCallStatement(call=call, loc=self._loc(meta))

    def return_statement(self, meta, ch):
        return A.ReturnStatement(value=ch[0], loc=self._loc(meta))

    def empty_statement(self, meta, ch):
        return A.EmptyStatement(loc=self._loc(meta))

    def switch_statement(self, meta, ch):
        return A.SwitchStatement(expr=ch[0], cases=list(ch[1:]), loc=self._loc(meta))

    def switch_case(self, meta, ch):
        label = None if ch[0] == "default" else ch[0]
        return A.SwitchCase(label=label, body=ch[1], loc=self._loc(meta))

    def default_label(self, meta, ch):
        return "default"

    # ---------------------------------------------------------------- expressions
    def expression_list(self, meta, ch):
        return list(ch)

    def argument_list(self, meta, ch):
        return [c for c in ch if c is not None]

    def arg_positional(self, meta, ch):
        return A.Argument(value=ch[0], loc=self._loc(meta))

    def arg_named(self, meta, ch):
        return A.Argument(value=ch[1], name=ch[0], loc=self._loc(meta))

    def ternary_expr(self, meta, ch):
        return A.TernaryExpression(cond=ch[0], then=ch[1], else_=ch[2], loc=self._loc(meta))

    def binop(self, meta, ch):
        return A.BinaryExpression(op=str(ch[1]), left=ch[0], right=ch[2], loc=self._loc(meta))

    def shr(self, meta, ch):
        return A.BinaryExpression(op=">>", left=ch[0], right=ch[3], loc=self._loc(meta))

    def unop(self, meta, ch):
        return A.UnaryExpression(op=str(ch[0]), operand=ch[1], loc=self._loc(meta))

    def cast_expr(self, meta, ch):
        return A.CastExpression(type_ref=ch[0], expr=ch[1], loc=self._loc(meta))

    def member_expr(self, meta, ch):
        return A.MemberExpression(expr=ch[0], member=ch[1], loc=self._loc(meta))

    def index_expr(self, meta, ch):
        return A.IndexExpression(expr=ch[0], index=ch[1], loc=self._loc(meta))

    def slice_expr(self, meta, ch):
        return A.SliceExpression(expr=ch[0], hi=ch[1], lo=ch[2], loc=self._loc(meta))

    def call_expr(self, meta, ch):
        return A.MethodCallExpression(callee=ch[0], type_args=ch[2] or [], args=ch[4], loc=self._loc(meta))

    def int_lit(self, meta, ch):
        value, width, signed = parse_int_literal(str(ch[0]))
        return A.IntLiteral(value=value, width=width, signed=signed, text=str(ch[0]), loc=self._loc(meta))

    def true_lit(self, meta, ch):
        return A.BoolLiteral(value=True, loc=self._loc(meta))

    def false_lit(self, meta, ch):
        return A.BoolLiteral(value=False, loc=self._loc(meta))

    def string_lit(self, meta, ch):
        raw = str(ch[0])[1:-1]
        return A.StringLiteral(value=re.sub(r"\\(.)", r"\1", raw), loc=self._loc(meta))

    def path_expr(self, meta, ch):
        return ch[0]

    def list_expr(self, meta, ch):
        return A.ListExpression(elems=ch[0] or [], loc=self._loc(meta))

    def struct_expr(self, meta, ch):
        fields = [A.NamedExpression(name=k, value=v, loc=v.loc) for k, v in ch[0]]
        return A.StructExpression(fields=fields, loc=self._loc(meta))

    def type_member(self, meta, ch):
        loc = self._loc(meta)
        return A.MemberExpression(expr=A.TypeNameExpression(type_ref=ch[0], loc=loc), member=ch[1], loc=loc)

    def error_member(self, meta, ch):
        loc = self._loc(meta)
        tref = A.BaseTypeRef(name="error", loc=loc)
        return A.MemberExpression(expr=A.TypeNameExpression(type_ref=tref, loc=loc), member=ch[0], loc=loc)

    def ctor_expr(self, meta, ch):
        loc = self._loc(meta)
        return A.MethodCallExpression(callee=A.TypeNameExpression(type_ref=ch[0], loc=loc), args=ch[1],
                                      call_kind=A.CallKind.CONSTRUCTOR, loc=loc)

    def dontcare_expr(self, meta, ch):
        return A.DontCareExpression(loc=self._loc(meta))

    def this_expr(self, meta, ch):
        raise P4Unsupported(self._loc(meta), "'this' expressions")


def parse_text(text: str, linemap: LineMap) -> A.Program:
    """Parse preprocessed ``text``; raises ``P4SyntaxError`` located in the user's source."""
    try:
        tree = get_parser().parse(text)
    except UnexpectedToken as exc:
        tok = exc.token
        if tok.type == "$END":
            loc = linemap.loc(max(1, len(linemap.entries)), 1)
            if exc.line not in (None, -1) and isinstance(exc.line, int):
                loc = linemap.loc(exc.line, exc.column)
            raise P4SyntaxError(loc, "syntax error: unexpected end of input") from None
        exp = _expected(exc.expected)
        raise P4SyntaxError(linemap.loc(tok.line, tok.column),
                            f"syntax error: unexpected {_describe(tok)}{exp}") from None
    except UnexpectedCharacters as exc:
        pos = exc.pos_in_stream
        ch = text[pos] if pos is not None and pos < len(text) else "?"
        raise P4SyntaxError(linemap.loc(exc.line, exc.column), f"syntax error: unexpected character '{ch}'") from None
    except UnexpectedEOF:
        raise P4SyntaxError(linemap.loc(max(1, len(linemap.entries)), 1),
                            "syntax error: unexpected end of input") from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark errors
        raise P4SyntaxError(linemap.loc(exc.line, exc.column), f"syntax error: {exc}") from None
    try:
        return _Builder(linemap).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, P4Error):
            raise exc.orig_exc from None
        raise


_PUNCT = {
    "SEMICOLON": "';'", "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'",
    "COMMA": "','", "COLON": "':'", "EQUAL": "'='", "RANGLE": "'>'", "LANGLE": "'<'",
    "IDENTIFIER": "identifier", "TYPE_IDENTIFIER": "type name",
}


def _expected(expected: set[str]) -> str:
    names = sorted(_PUNCT[e] for e in expected if e in _PUNCT)
    if not names or len(expected) > 6:
        return ""
    return " (expected " + " or ".join(names) + ")"

