"""The contract between the lowering, the back ends and an architecture plug-in.

The Python back end (``softswitch.backends.python``) knows the P4_16 language and its
core library (``packet_in``, ``packet_out``, ``verify``, ``static_assert``) and nothing
else: which package a program must instantiate, what each architecture extern does, which port means
"drop" and which requests a block may leave for the pipeline all come from an
`Architecture` object handed to `compile_program`. This is the split
behavioral-model makes between bm_sim and its targets (simple_switch plugs the
v1model rules in); `softswitch.v1model.V1MODEL` is the one provided.

An architecture describes its externs twice, on purpose:

* `ExternSemantics`, target-independent: what a call does (an `ExternOp`, the
  metadata fields it writes, the request it records, the run-time state it uses).
  A backend that generates other code (the eBPF one) asks the same object what
  ``mark_to_drop`` or ``clone`` means and lowers it its own way;
* a Python lowering per extern call (`PythonCallLowering`): the Python back end,
  which emits Python source through a `PythonEmitter`; and per extern type the maker
  of its instances' run-time objects (`PythonInstanceLowering`), which
  `softswitch.objects` calls for every target.

Names are ``"mark_to_drop"`` for an extern function, ``"register.read"`` for a
method of an extern type and ``"register"`` for the type itself (its instances).
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.trace import TraceEvent


class PacketContext:
    """Per-packet scratch state shared by the generated code of one program.

    The pipeline resets it before each block runs; generated code reads the
    packet length, time and unparsed payload from it. An architecture subclasses
    it with the slots of the requests its externs record (clone, resubmit ...)
    and clears them in `reset_requests`. One per compiled program (never
    module-level)."""

    __slots__ = ("length", "now_us", "payload", "trace")

    def __init__(self) -> None:
        self.trace: list[TraceEvent] | None = None
        self.length = 0
        self.now_us = 0
        self.payload = b""
        self.reset_requests()

    def reset_requests(self) -> None:
        """Forget the requests the last block recorded (none in the base)."""


class ExternOp(enum.Enum):
    """What an extern does, in terms every backend can implement."""

    SET_METADATA = enum.auto()       # write constants (`writes`) into the standard metadata
    REQUEST = enum.auto()            # record `request` in the packet context; the pipeline acts after the block
    HASH = enum.auto()               # out = base + hash(algorithm, data) % max
    CHECKSUM_VERIFY = enum.auto()    # if cond and hash(data) != checksum: record `request`
    CHECKSUM_UPDATE = enum.auto()    # if cond: checksum = hash(data)
    RANDOM = enum.auto()             # out = uniform in [lo, hi]
    DIGEST = enum.auto()             # queue the field list for the control plane
    ASSERT = enum.auto()             # false: drop the packet, naming the source position
    LOG = enum.auto()                # a message for the packet trace only
    STATE_READ = enum.auto()         # read run-time `state` at an index
    STATE_WRITE = enum.auto()        # write run-time `state` at an index
    COUNT = enum.auto()              # count the packet (and its bytes) at an index
    METER = enum.auto()              # colour the packet at an index (RFC 2698)
    DIRECT_COUNT = enum.auto()       # nothing at the call: the table counts its hit entry
    DIRECT_METER_READ = enum.auto()  # the colour the table's hit entry got
    INSTANCE = enum.auto()           # an extern type: its instances are run-time `state`


@dataclass(slots=True, frozen=True, kw_only=True)
class ExternSemantics:
    """What one extern function, method or type does, independent of any target.

    ``params`` names the arguments in order (as the architecture's .p4 declares
    them); ``writes`` the standard-metadata fields an op writes and their values;
    ``request`` the packet-context request an op records (for REQUEST, the
    request's name, e.g. ``"clone"``; its arguments are ``params``);
    ``with_payload`` that a hash covers the unparsed payload too; ``state`` the
    kind of run-time object (``"register"``, ``"counter"`` ...) the op works on."""

    name: str
    op: ExternOp
    doc: str
    params: tuple[str, ...] = ()
    writes: tuple[tuple[str, int], ...] = ()
    request: str | None = None
    with_payload: bool = False
    state: str | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class ExternCall:
    """One call of an architecture extern, as the compiler hands it to a lowering."""

    semantics: ExternSemantics
    node: A.MethodCallExpression
    args: list[A.Expression]
    obj: str | None = None        # the instance's name in generated code (methods only)
    as_statement: bool = True


@dataclass(slots=True, frozen=True, kw_only=True)
class InstanceRequest:
    """An extern instance to create: ``register<bit<32>>(16) r;`` or an inline
    ``implementation = action_selector(...)`` (then `name` is P4Info's
    ``<table>_implementation``)."""

    type_name: str
    name: str                     # the control-plane (P4Info) name
    args: list[A.Expression]
    type_args: list[T.P4Type] = field(default_factory=list)
    loc: A.SourceLoc | None = None

    def const(self, i: int) -> int:
        """Argument `i` as a compile-time integer (a clear error otherwise)."""
        v = self.args[i].const_value if i < len(self.args) else None
        if not isinstance(v, int) or isinstance(v, bool):
            raise CompileError(f"{self.loc}: {self.type_name} {self.name}: argument {i + 1} "
                               f"must be a constant")
        return int(v)

    def enum_member(self, i: int) -> str | None:
        """Argument `i` as the name of an enum member (``CounterType.packets`` -> packets)."""
        a = self.args[i] if i < len(self.args) else None
        return a.member if isinstance(a, A.MemberExpression) else None


class PythonEmitter(Protocol):
    """What a Python lowering may ask of the compiler while it compiles one call."""

    block: str                    # the control-plane name of the block being compiled
    indent: int                   # emit() indentation; raise it around nested lines

    def ex(self, e: A.Expression) -> str:
        """The Python expression of a P4 expression."""

    def assign(self, lhs: A.Expression, code: str) -> None:
        """Store `code` into the P4 lvalue `lhs`."""

    def emit(self, line: str) -> None:
        """Append one statement at the current indentation."""

    def trace(self, kind: str, detail: str) -> None:
        """Emit a trace event (`detail` is Python source of a dict)."""

    def fail(self, node: Any, what: str) -> CompileError:
        """An ``unsupported: ...`` error naming `node`'s file:line:col."""

    def field_list(self, data: A.Expression) -> tuple[list[str], list[int | str]]:
        """A field-list argument flattened into value codes and widths."""

    def pack_fields(self, data: A.Expression, *, payload: bool = False) -> str:
        """Code of the bytes of a field list (plus the packet's payload)."""

    def bind(self, name: str, obj: Any) -> str:
        """Make `obj` reachable from generated code as `name`; returns `name`."""

    def digest_queue(self, data: A.Expression) -> str:
        """The generated-code name of the digest queue for `data`'s type."""


PythonCallLowering = Callable[[PythonEmitter, ExternCall], str]
"""Emits the Python of one call; returns the value's code ("" for a statement)."""

PythonInstanceLowering = Callable[[InstanceRequest], Any]
"""Creates the run-time object of one extern instance (a `softswitch.externs` object
or an `ActionProfile`, on every target); `softswitch.objects` files it by its class
for the runtime API."""


@dataclass(slots=True, frozen=True, kw_only=True)
class TableConventions:
    """The table properties an architecture gives meaning to (None: it has none):
    which one names the table's direct counter, its direct meter, its action
    profile or selector, and the match kind of keys that only feed a selector."""

    direct_counters: str | None = None
    direct_meters: str | None = None
    implementation: str | None = None
    selector_match_kind: str | None = None


class Architecture:
    """Base of an architecture plug-in; a subclass fills in the class attributes
    and the two lowering tables (see `softswitch.v1model.architecture`)."""

    name: str = ""
    package: str = ""                       # the package `main` must instantiate
    block_params: tuple[str, ...] = ()      # its parameters, in pipeline order
    drop_port: int = 0                      # the egress port that means "drop"
    custom_hashes: Mapping[str, int] = MappingProxyType({})  # hashes the control plane sets -> CRC width
    tables: TableConventions = TableConventions()
    context_class: type[PacketContext] = PacketContext

    def __init__(self, *, externs: Mapping[str, ExternSemantics],
                 python_calls: Mapping[str, PythonCallLowering] | None = None,
                 python_instances: Mapping[str, PythonInstanceLowering] | None = None) -> None:
        python_calls = python_calls or {}
        python_instances = python_instances or {}
        missing = (set(python_calls) | set(python_instances)) - set(externs)
        if missing:
            raise ValueError(f"architecture {self.name}: lowerings without semantics: {sorted(missing)}")
        self.externs = dict(externs)
        # this object's own Python lowerings (a target's extra externs); the Python back
        # end keeps the architecture family's (softswitch.backends.python.arch_lowering)
        self.python_calls = dict(python_calls)
        self.python_instances = dict(python_instances)

    def add_extern(self, semantics: ExternSemantics, *, python_call: PythonCallLowering | None = None,
                   python_instance: PythonInstanceLowering | None = None) -> None:
        """Teach this architecture one more extern (a target's own, as BMv2 targets
        add primitives): its semantics and its Python lowering."""
        self.externs[semantics.name] = semantics
        if python_call is not None:
            self.python_calls[semantics.name] = python_call
        if python_instance is not None:
            self.python_instances[semantics.name] = python_instance

    def check_package(self, main: A.MainPackage | None) -> None:
        """Refuse a program this architecture cannot run, naming the package and
        where `main` instantiates it."""
        if main is None:
            raise CompileError(f"program declares no main package ({self.name} needs {self.package})")
        where = main.decl.loc
        if main.package != self.package:
            declared = getattr(main.decl.type_decl, "loc", None)
            at = f", declared at {declared}" if declared is not None and declared != where else ""
            raise CompileError(f"{where}: unsupported: package {main.package}{at}: architecture "
                               f"{self.name} runs {self.package} only")
        have = {b.param for b in main.blocks}
        missing = [p for p in self.block_params if p not in have]
        if missing:
            raise CompileError(f"{where}: {self.package} main misses blocks {missing}")

    def new_context(self) -> PacketContext:
        """The per-packet context of one compiled program, with this architecture's
        request slots (see `PacketContext.reset_requests`)."""
        return self.context_class()

    def semantics(self, name: str) -> ExternSemantics | None:
        return self.externs.get(name)

    def python_call(self, name: str) -> PythonCallLowering | None:
        return self.python_calls.get(name)

    def python_instance(self, type_name: str) -> PythonInstanceLowering | None:
        return self.python_instances.get(type_name)
