"""Syntax tree of a P4_16 program, as the parser builds it and the checker annotates it.

Why one module: this is the contract between the front end (parser + checker) and every
consumer (compiled pipeline, P4Info, debugger).  Nodes are plain dataclasses with slots;
the parser fills the syntactic fields, the checker fills the *annotation fields* listed
below in place.  Nodes use identity equality (``eq=False``) so they can be dict keys.

How to read a checked tree (what the checker guarantees once ``load_program`` returned):

* Every ``Expression`` has ``.type`` set to a ``softswitch.frontend.types`` object.
  Integer literals and other compile-time integers take their final type from the
  context: in ``x + 1`` with ``x: bit<8>`` the literal's ``.type`` is ``bit<8>``; an
  ``int`` (arbitrary precision) type only remains where no width is implied (e.g. a
  ``const int``, a stack index, a slice bound, a shift amount, ``push_front`` counts,
  entry priorities, annotation arguments, or a generic extern argument whose type
  variable nothing else binds, such as ``hash(..., 65536)``); such expressions always
  have ``.const_value``.
* Every expression whose value is known at compile time has ``.const_value`` set
  (``int`` for integers/serializable enum members, ``bool`` for booleans).  For
  fixed-width types the value is already reduced to the width (two's complement
  range for ``int<W>``).  Widths, stack sizes, slice bounds, table sizes, const
  entries and default-action arguments are always folded.
* Every name reference (``PathExpression``, ``NamedTypeRef``) has ``.decl`` set to the
  declaration node it resolves to (a ``Parameter``, ``VariableDecl``, ``ConstDecl``,
  ``InstantiationDecl``, ``TableDecl``, ``ActionDecl``, ``ParserState``, ``EnumDecl``,
  ``ErrorDecl`` ...).
* Every ``MemberExpression`` has ``.kind`` (a ``MemberKind``) saying what the dot means:
  a header/struct field, an enum/error member, a stack property (``next``, ``last``,
  ``size``, ``lastIndex``), a table-apply result (``hit``, ``miss``, ``action_run``) or
  a method (``isValid``, ``extract``, a register's ``read`` ...).
* Every ``MethodCallExpression`` has ``.call_kind`` (a ``CallKind``) and ``.callee_decl``
  (the ``ActionDecl``, ``FunctionDecl``, ``ExternFunctionDecl``, ``MethodDecl``,
  ``TableDecl`` (for ``t.apply()``), ``ParserDecl``/``ControlDecl`` (for sub-parser /
  sub-control ``apply`` or constructor calls) or ``None`` for built-in methods such
  as ``isValid``/``setValid``/``push_front``).  ``.args`` are in declaration order
  after the checker ran (named arguments are reordered, omitted optional/default
  parameters are filled with their defaults) and ``.params`` holds the matching
  ``Parameter`` nodes (``None`` entries for built-ins without declarations).
* Every ``TypeRef`` has ``.type`` set.  ``typedef`` names are resolved away to the
  underlying type; ``type`` (new type) declarations stay distinct (``types.NewType``).
* ``CheckedProgram.main`` describes the ``main`` package instantiation: its blocks
  in the package's parameter order, each with the parser/control declaration and its
  constructor arguments.  Which package a program must use is the architecture's
  business (``softswitch.architecture``); the front end accepts any.

Locations: every node has ``loc`` (``SourceLoc``: file, line, column, 1-based) pointing
at the user's source (``#line`` markers of the preprocessor are honoured).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .walk import iter_nodes  # noqa: F401  (re-exported for consumers: A.iter_nodes)

if TYPE_CHECKING:
    from .types import P4Type


@dataclass(slots=True, frozen=True)
class SourceLoc:
    """Where a node starts in the user's source (after preprocessing, mapped back)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_LOC = SourceLoc("<unknown>", 0, 0)


@dataclass(slots=True, kw_only=True, eq=False)
class Node:
    loc: SourceLoc = UNKNOWN_LOC


@dataclass(slots=True, kw_only=True, eq=False)
class Annotation(Node):
    """``@name`` or ``@name(expr, ...)`` or ``@name[key=value, ...]``.

    ``args`` holds parsed expressions when the body is an expression list (e.g.
    ``@id(5)``, ``@name("x")``, ``@field_list(1)``, ``@priority(3)``); ``kv`` holds
    ``key=value`` pairs; ``raw`` keeps the body text for unstructured annotations.
    """

    name: str
    args: list[Expression] = field(default_factory=list)
    kv: dict[str, Expression] = field(default_factory=dict)
    raw: str = ""


def find_annotation(annotations: list[Annotation], name: str) -> Annotation | None:
    for ann in annotations:
        if ann.name == name:
            return ann
    return None


class Direction(enum.Enum):
    NONE = ""  # directionless (action data, constructor parameters)
    IN = "in"
    OUT = "out"
    INOUT = "inout"


# --------------------------------------------------------------------- type references
@dataclass(slots=True, kw_only=True, eq=False)
class TypeRef(Node):
    """A type as written in source; ``.type`` is the resolved ``types.P4Type``."""

    type: P4Type | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class BitTypeRef(TypeRef):
    """``bit<W>``, ``int<W>``, ``bit`` (= bit<1>).  ``width`` is folded by the checker."""

    width: Expression | None
    signed: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class VarbitTypeRef(TypeRef):
    width: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class BaseTypeRef(TypeRef):
    """Keyword types: ``bool``, ``int``, ``string``, ``error``, ``match_kind``, ``void``, ``_``."""

    name: str


@dataclass(slots=True, kw_only=True, eq=False)
class NamedTypeRef(TypeRef):
    """A type name, possibly dot-prefixed; ``.decl`` is the declaration it names."""

    name: str
    dot_prefix: bool = False
    decl: Any = None


@dataclass(slots=True, kw_only=True, eq=False)
class SpecializedTypeRef(TypeRef):
    """``Name<T1, T2>``, e.g. ``register<bit<32>>``."""

    base: NamedTypeRef
    args: list[TypeRef]


@dataclass(slots=True, kw_only=True, eq=False)
class StackTypeRef(TypeRef):
    """``T[size]`` (header stack)."""

    elem: TypeRef
    size: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class TupleTypeRef(TypeRef):
    elems: list[TypeRef]


# --------------------------------------------------------------------- expressions
@dataclass(slots=True, kw_only=True, eq=False)
class Expression(Node):
    type: P4Type | None = None
    const_value: int | bool | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class IntLiteral(Expression):
    """``42``, ``8w5``, ``4s-3`` (sign folded by the parser only for width-prefixed form),
    ``0x1F``.  ``width``/``signed`` are from the literal's own prefix (None if none)."""

    value: int
    width: int | None = None
    signed: bool = False
    text: str = ""


@dataclass(slots=True, kw_only=True, eq=False)
class BoolLiteral(Expression):
    value: bool


@dataclass(slots=True, kw_only=True, eq=False)
class StringLiteral(Expression):
    value: str


@dataclass(slots=True, kw_only=True, eq=False)
class PathExpression(Expression):
    """A name; ``.decl`` is what it resolves to (set by the checker)."""

    name: str
    dot_prefix: bool = False
    decl: Any = None


@dataclass(slots=True, kw_only=True, eq=False)
class TypeNameExpression(Expression):
    """A type used as an expression prefix (e.g. ``error`` in ``error.NoMatch`` or a type
    in ``T.minSizeInBits``); also the target of constructor calls ``Parser()``."""

    type_ref: TypeRef


class MemberKind(enum.Enum):
    FIELD = "field"  # header/struct/union field
    ENUM_MEMBER = "enum_member"  # enum, serializable enum
    ERROR_MEMBER = "error_member"
    MATCH_KIND_MEMBER = "match_kind_member"
    STACK_NEXT = "next"
    STACK_LAST = "last"
    STACK_SIZE = "size"
    STACK_LAST_INDEX = "lastIndex"
    TABLE_HIT = "hit"
    TABLE_MISS = "miss"
    TABLE_ACTION_RUN = "action_run"
    METHOD = "method"  # callee of a method call (extern, built-in, apply)


@dataclass(slots=True, kw_only=True, eq=False)
class MemberExpression(Expression):
    """``expr.member``.  ``.kind`` and ``.decl`` (field ``StructField``, ``EnumMember``,
    ``MethodDecl`` ...) are set by the checker."""

    expr: Expression
    member: str
    kind: MemberKind | None = None
    decl: Any = None


@dataclass(slots=True, kw_only=True, eq=False)
class IndexExpression(Expression):
    """``stack[i]``; ``index.const_value`` is set when the index is compile-time known."""

    expr: Expression
    index: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class SliceExpression(Expression):
    """``expr[hi:lo]``; ``hi_value``/``lo_value`` are folded ints set by the checker."""

    expr: Expression
    hi: Expression
    lo: Expression
    hi_value: int | None = None
    lo_value: int | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class UnaryExpression(Expression):
    """``op`` is one of ``! ~ - +``."""

    op: str
    operand: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class BinaryExpression(Expression):
    """``op``: ``* / % + - |+| |-| << >> <= >= < > != == & ^ | && || ++``."""

    op: str
    left: Expression
    right: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class TernaryExpression(Expression):
    cond: Expression
    then: Expression
    else_: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class CastExpression(Expression):
    """``(T) expr``.  ``implicit`` is True for casts the checker inserted (none today:
    literals get their type directly; reserved for future use)."""

    type_ref: TypeRef
    expr: Expression
    implicit: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class Argument(Node):
    """A call argument; ``name`` for ``f(x = 1)``; ``value`` may be ``DontCareExpression``."""

    value: Expression
    name: str | None = None


class CallKind(enum.Enum):
    ACTION = "action"  # direct action call
    FUNCTION = "function"  # P4 function
    EXTERN_FUNCTION = "extern_function"  # mark_to_drop, hash, verify, ...
    EXTERN_METHOD = "extern_method"  # reg.read, pkt.extract, ...
    BUILTIN_METHOD = "builtin_method"  # isValid, setValid, setInvalid, push_front, pop_front, minSizeInBits
    TABLE_APPLY = "table_apply"
    PARSER_APPLY = "parser_apply"  # sub-parser instance .apply(...)
    CONTROL_APPLY = "control_apply"  # sub-control instance .apply(...)
    CONSTRUCTOR = "constructor"  # P() / register<...>(16) in an argument or instantiation


@dataclass(slots=True, kw_only=True, eq=False)
class MethodCallExpression(Expression):
    """``callee<type_args>(args)``.  Checker sets ``call_kind``, ``callee_decl``, ``params``
    and ``type_bindings`` (type-variable name -> resolved type, e.g. ``{"T": bit<32>}``)."""

    callee: Expression
    type_args: list[TypeRef] = field(default_factory=list)
    args: list[Argument] = field(default_factory=list)
    call_kind: CallKind | None = None
    callee_decl: Any = None
    params: list[Any] = field(default_factory=list)
    type_bindings: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True, eq=False)
class ListExpression(Expression):
    """``{a, b, c}``: a tuple/list initialiser (e.g. field list for ``hash``); ``.type`` is a
    ``types.TupleType``, or the struct/header type when assigned to one."""

    elems: list[Expression]


@dataclass(slots=True, kw_only=True, eq=False)
class NamedExpression(Node):
    name: str
    value: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class StructExpression(Expression):
    """``{a = 1, b = x}``: a struct/header initialiser; ``.type`` the target struct type."""

    fields: list[NamedExpression]


@dataclass(slots=True, kw_only=True, eq=False)
class DontCareExpression(Expression):
    """``_`` as an ``out`` argument or select/keyset wildcard."""


# --------------------------------------------------------------------- keysets
@dataclass(slots=True, kw_only=True, eq=False)
class Keyset(Node):
    """One component of a select case label or a const table entry key."""


@dataclass(slots=True, kw_only=True, eq=False)
class DefaultKeyset(Keyset):
    """``default`` or ``_`` (both match anything)."""

    is_dont_care: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class ValueKeyset(Keyset):
    """A plain value; if ``expr.decl`` is a ``ValueSetDecl`` this is a value_set match."""

    expr: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class MaskKeyset(Keyset):
    """``value &&& mask``."""

    value: Expression
    mask: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class RangeKeyset(Keyset):
    """``lo .. hi`` (inclusive)."""

    lo: Expression
    hi: Expression


# --------------------------------------------------------------------- statements
@dataclass(slots=True, kw_only=True, eq=False)
class Statement(Node):
    pass


@dataclass(slots=True, kw_only=True, eq=False)
class AssignmentStatement(Statement):
    lhs: Expression
    rhs: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class MethodCallStatement(Statement):
    call: MethodCallExpression


@dataclass(slots=True, kw_only=True, eq=False)
class BlockStatement(Statement):
    statements: list[Statement | Declaration] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class IfStatement(Statement):
    cond: Expression
    then: Statement
    else_: Statement | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class SwitchCase(Node):
    """``label: body`` or ``label:`` (fall through, ``body`` None).  ``label`` is an
    expression (an action name ``PathExpression`` for ``switch (t.apply().action_run)``,
    or a value) or None for ``default``."""

    label: Expression | None
    body: BlockStatement | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class SwitchStatement(Statement):
    expr: Expression
    cases: list[SwitchCase]


@dataclass(slots=True, kw_only=True, eq=False)
class ExitStatement(Statement):
    pass


@dataclass(slots=True, kw_only=True, eq=False)
class ForStatement(Statement):
    """``for (init; cond; update) body`` (P4_16 1.2.5): init may declare variables,
    scoped to the loop; a missing condition is true."""

    init: list[Statement | Declaration] = field(default_factory=list)
    cond: Expression | None = None
    update: list[Statement] = field(default_factory=list)
    body: Statement | None = None
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class ForInStatement(Statement):
    """``for (T v in lo .. hi) body`` (both bounds included) or ``for (T v in stack)``
    (``hi`` None: each element of a header stack, in order)."""

    var: VariableDecl
    collection: Expression
    hi: Expression | None = None
    body: Statement | None = None
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class BreakStatement(Statement):
    pass


@dataclass(slots=True, kw_only=True, eq=False)
class ContinueStatement(Statement):
    pass


@dataclass(slots=True, kw_only=True, eq=False)
class ReturnStatement(Statement):
    value: Expression | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class EmptyStatement(Statement):
    pass


# --------------------------------------------------------------------- declarations
@dataclass(slots=True, kw_only=True, eq=False)
class Declaration(Node):
    name: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class ConstDecl(Declaration):
    """``const T name = value;`` (``value.const_value`` is folded)."""

    type_ref: TypeRef
    value: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class VariableDecl(Declaration):
    """``T name [= init];`` in a parser/control/action/function/block."""

    type_ref: TypeRef
    init: Expression | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class StructField(Declaration):
    type_ref: TypeRef


@dataclass(slots=True, kw_only=True, eq=False)
class HeaderDecl(Declaration):
    fields: list[StructField]


@dataclass(slots=True, kw_only=True, eq=False)
class HeaderUnionDecl(Declaration):
    fields: list[StructField]


@dataclass(slots=True, kw_only=True, eq=False)
class StructDecl(Declaration):
    fields: list[StructField]


@dataclass(slots=True, kw_only=True, eq=False)
class EnumMember(Declaration):
    """``value`` is the initialiser of a serializable enum member (None for plain enums);
    ``int_value`` is its folded value (set by the checker)."""

    value: Expression | None = None
    int_value: int | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class EnumDecl(Declaration):
    """``enum E { A, B }`` or ``enum bit<8> E { A = 1 }`` (``underlying`` set)."""

    members: list[EnumMember]
    underlying: TypeRef | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class ErrorDecl(Declaration):
    """``error { A, B }`` (several declarations merge; name is ``"error"``)."""

    members: list[EnumMember]


@dataclass(slots=True, kw_only=True, eq=False)
class MatchKindDecl(Declaration):
    """``match_kind { exact, ternary }`` (name is ``"match_kind"``)."""

    members: list[EnumMember]


@dataclass(slots=True, kw_only=True, eq=False)
class TypedefDecl(Declaration):
    """``typedef T name;`` (``is_newtype`` for ``type T name;``)."""

    type_ref: TypeRef
    is_newtype: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class Parameter(Declaration):
    direction: Direction
    type_ref: TypeRef
    default: Expression | None = None
    optional: bool = False  # @optional


@dataclass(slots=True, kw_only=True, eq=False)
class MethodDecl(Declaration):
    """Extern method or constructor (``return_type`` None for constructors)."""

    return_type: TypeRef | None
    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)
    is_abstract: bool = False
    is_constructor: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class ExternDecl(Declaration):
    """``extern Name<T> { constructors; methods }``."""

    type_params: list[str] = field(default_factory=list)
    methods: list[MethodDecl] = field(default_factory=list)

    @property
    def constructors(self) -> list[MethodDecl]:
        return [m for m in self.methods if m.is_constructor]


@dataclass(slots=True, kw_only=True, eq=False)
class ExternFunctionDecl(Declaration):
    """``extern R name<T>(params);``."""

    return_type: TypeRef
    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class FunctionDecl(Declaration):
    return_type: TypeRef
    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)
    body: BlockStatement = field(default_factory=BlockStatement)


@dataclass(slots=True, kw_only=True, eq=False)
class ParserTypeDecl(Declaration):
    """``parser Name<T>(params);`` (an abstract parser type, as an architecture declares
    the parsers its package takes)."""

    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class ControlTypeDecl(Declaration):
    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class PackageTypeDecl(Declaration):
    """``package Pkg<H, M>(Prs<H, M> p, ...);``: an architecture's top-level block."""

    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class ValueSetDecl(Declaration):
    """``value_set<T>(size) name;`` in a parser."""

    elem_type: TypeRef
    size: Expression


@dataclass(slots=True, kw_only=True, eq=False)
class SelectCase(Node):
    """``(k1, k2): state;`` — one keyset per select key (a single keyset when one key)."""

    keysets: list[Keyset]
    next_state: PathExpression


@dataclass(slots=True, kw_only=True, eq=False)
class SelectExpression(Node):
    keys: list[Expression]
    cases: list[SelectCase]


@dataclass(slots=True, kw_only=True, eq=False)
class ParserState(Declaration):
    """A parser state.  ``transition`` is a ``PathExpression`` naming the next state
    (``accept``/``reject`` resolve to the built-in states ``ACCEPT``/``REJECT`` of the
    parser), a ``SelectExpression``, or None (no transition: goes to reject, per spec)."""

    statements: list[Statement | Declaration] = field(default_factory=list)
    transition: PathExpression | SelectExpression | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class ParserDecl(Declaration):
    """``parser Name(params)(ctor_params) { locals; states }``.

    The checker adds the built-in ``accept`` and ``reject`` states to ``builtin_states``
    (``ParserState`` nodes with no statements) so that transitions can point at them.
    """

    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)
    ctor_params: list[Parameter] = field(default_factory=list)
    locals: list[Declaration] = field(default_factory=list)
    states: list[ParserState] = field(default_factory=list)
    builtin_states: dict[str, ParserState] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True, eq=False)
class ActionDecl(Declaration):
    """``action a(directional params, action-data params) { body }``: parameters with a
    direction come first (bound at call site), directionless ones are action data
    (supplied by the control plane or a const entry / default_action)."""

    params: list[Parameter] = field(default_factory=list)
    body: BlockStatement = field(default_factory=BlockStatement)


@dataclass(slots=True, kw_only=True, eq=False)
class KeyElement(Node):
    """``expr : match_kind`` in a table key; ``match_kind`` is the member name."""

    expr: Expression
    match_kind: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class ActionRef(Node):
    """``a`` or ``a(args)`` in a table's ``actions``, ``default_action`` or an entry.
    ``decl`` is the ``ActionDecl``; ``args`` bind parameters (for ``default_action`` /
    entries the action data, folded to constants by the checker; in ``actions`` the
    directional ones) and ``params`` (added later, set by the checker) names the
    ``Parameter`` each argument binds, in the same order."""

    name: PathExpression
    args: list[Argument] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    has_parens: bool = False
    decl: Any = None
    params: list[Any] = field(default_factory=list)  # the Parameter bound by each of args


@dataclass(slots=True, kw_only=True, eq=False)
class TableEntry(Node):
    """One ``entries`` element: ``(keysets) : action(args)`` with optional priority
    (``priority = N :`` prefix or ``@priority(N)``); ``priority_value`` is folded."""

    keysets: list[Keyset]
    action: ActionRef
    priority: Expression | None = None
    priority_value: int | None = None
    is_const: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class TableProperty(Node):
    """Any other table property, e.g. ``counters = c;``, ``meters = m;``,
    ``implementation = ap;``, ``support_timeout = true;``."""

    name: str
    value: Expression
    is_const: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, eq=False)
class TableDecl(Declaration):
    keys: list[KeyElement] = field(default_factory=list)
    actions: list[ActionRef] = field(default_factory=list)
    default_action: ActionRef | None = None
    default_action_const: bool = False
    entries: list[TableEntry] | None = None
    entries_const: bool = False
    size: Expression | None = None
    size_value: int | None = None  # folded by the checker
    properties: list[TableProperty] = field(default_factory=list)

    def property(self, name: str) -> TableProperty | None:
        for prop in self.properties:
            if prop.name == name:
                return prop
        return None


@dataclass(slots=True, kw_only=True, eq=False)
class InstantiationDecl(Declaration):
    """``Type(args) name;`` e.g. ``register<bit<32>>(16) r;``, ``counter(8, CounterType.packets) c;``,
    ``Sub() sub;`` (sub-parser/sub-control instance), ``Pkg(P(), ...) main;``.
    The checker sets ``type_decl`` (``ExternDecl``/``ParserDecl``/``ControlDecl``/
    ``PackageTypeDecl``), ``ctor`` (the matching constructor ``MethodDecl`` for externs)
    and ``type_bindings``."""

    type_ref: TypeRef
    args: list[Argument] = field(default_factory=list)
    type_decl: Any = None
    ctor: Any = None
    type_bindings: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True, eq=False)
class ControlDecl(Declaration):
    type_params: list[str] = field(default_factory=list)
    params: list[Parameter] = field(default_factory=list)
    ctor_params: list[Parameter] = field(default_factory=list)
    locals: list[Declaration] = field(default_factory=list)
    body: BlockStatement = field(default_factory=BlockStatement)


# --------------------------------------------------------------------- program
@dataclass(slots=True, kw_only=True, eq=False)
class Program(Node):
    """All top-level declarations in source order (including those from includes)."""

    declarations: list[Declaration] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class PackageBlock:
    """One argument of the main package: ``param`` is the package's parameter name
    as the architecture's .p4 declares it (e.g. ``ig``), ``decl`` the
    ``ParserDecl``/``ControlDecl`` and ``args`` its constructor arguments."""

    param: str
    decl: ParserDecl | ControlDecl
    args: list[Argument] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class MainPackage:
    """The resolved ``main`` instantiation (``package``: the package type's name)."""

    package: str
    decl: InstantiationDecl
    blocks: list[PackageBlock] = field(default_factory=list)

    def block(self, param: str) -> PackageBlock:
        for blk in self.blocks:
            if blk.param == param:
                return blk
        raise KeyError(param)


@dataclass(slots=True, kw_only=True)
class CheckedProgram:
    """What ``load_program`` returns: the checked tree plus indexes for consumers.

    ``errors`` lists the ``error`` members in declaration order (their codes are
    their positions, 0 = ``NoError`` as in BMv2); ``match_kinds`` the declared match
    kinds; ``top_level`` maps each top-level name to its declaration; ``main`` is the
    resolved package (None only if the program declares no ``main``).
    """

    program: Program
    main: MainPackage | None
    top_level: dict[str, Declaration] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    match_kinds: list[str] = field(default_factory=list)
    source_files: list[str] = field(default_factory=list)

    def lookup(self, name: str) -> Declaration:
        return self.top_level[name]


Node_ = Declaration | Statement | Expression
