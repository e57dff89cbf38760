"""The Python back end's v1model: its externs lowered to Python, one implementation of
the semantics `softswitch.v1model.architecture` gives them (registered for `V1Model`
in `arch_lowering.py`).

Each call lowering gets the compiler's `PythonEmitter` and the `ExternCall` (its
`ExternSemantics` included) and emits a few lines; the metadata a call writes and
the request it records are read from the semantics, so the table in
`softswitch/v1model/architecture.py` and this code cannot disagree. Requests go into the packet
context (`V1PacketContext`), which `V1Switch` reads after the block. The run-time
objects of v1model's extern instances are every target's (`softswitch.objects.v1model`).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from softswitch.architecture import (
    ExternCall,
    PythonCallLowering,
    PythonEmitter,
)
from softswitch.backends.python.exprs import scalar_kind
from softswitch.errors import CompileError
from softswitch.externs import hashes
from softswitch.frontend import ast as A
from softswitch.v1model.architecture import CloneType

# request name (ExternSemantics.request) -> the V1PacketContext slot of its field list
_FIELD_LIST_SLOT = {"resubmit": "resubmit_fl", "recirculate": "recirc_fl"}


# ---------------------------------------------------------------- run-time helpers
def _hmod(h: int, base: int, maxv: int, mask: int) -> int:
    if maxv:
        return (base + h % maxv) & mask
    return base & mask


def _random(lo: int, hi: int) -> int:
    return random.randint(lo, hi) if hi >= lo else lo


def _fmt_msg(msg: str, data: Any) -> str:
    vals = list(data) if isinstance(data, tuple) else [data]
    out = []
    parts = msg.split("{}")
    for i, p in enumerate(parts):
        out.append(p)
        if i < len(parts) - 1:
            out.append(str(vals[i]) if i < len(vals) else "{}")
    return "".join(out)


def hash_symbol(algorithm: str) -> str:
    """The name generated code calls hash `algorithm` by. It is looked up in the
    program's namespace at each call, so `rebind_hash` changes every call site."""
    return "_hash_" + algorithm


def rebind_hash(env: dict[str, Any], algorithm: str, fn: Callable[[bytes], int]) -> None:
    """From the next packet on, code compiled into `env` computes `algorithm` with `fn`
    (`arch_lowering.rebind_hash`: the runtime API's custom CRC parameters)."""
    env[hash_symbol(algorithm)] = fn


def _hash_of(b: PythonEmitter, algo: A.Expression, data: A.Expression, *, payload: bool = False) -> str:
    """Code of hash `algo` (a constant ``HashAlgorithm`` member) over field list `data`,
    calling the function bound as `hash_symbol(algo)`."""
    name = algo.member if isinstance(algo, A.MemberExpression) else None
    if name is None:
        raise b.fail(algo, "hash algorithm that is not a constant HashAlgorithm member")
    if name not in hashes.HASH_ALGORITHMS:
        raise CompileError(f"{algo.loc}: unsupported hash algorithm {name}")
    fn = b.bind(hash_symbol(name), hashes.HASH_ALGORITHMS[name])
    return f"{fn}({b.pack_fields(data, payload=payload)})"


def _mask(e: A.Expression) -> int:
    return (1 << scalar_kind(e.type)[1]) - 1


# ---------------------------------------------------------------- function calls
def _set_metadata(b: PythonEmitter, c: ExternCall) -> str:
    sm = b.ex(c.args[0]) if c.args else "PK.sm"  # the legacy mark_to_drop() writes the block's
    b.emit("; ".join(f"{sm}.{f} = {v}" for f, v in c.semantics.writes))
    b.trace("extern", f"{{'extern': {c.semantics.name!r}}}")
    return ""


def _hash(b: PythonEmitter, c: ExternCall) -> str:
    out, algo, base, data, maxv = c.args
    b.assign(out, f"_hmod({_hash_of(b, algo, data)}, {b.ex(base)}, {b.ex(maxv)}, {_mask(out)})")
    b.bind("_hmod", _hmod)
    return ""


def _random_call(b: PythonEmitter, c: ExternCall) -> str:
    out, lo, hi = c.args
    b.assign(out, f"{b.bind('_random', _random)}({b.ex(lo)}, {b.ex(hi)})")
    return ""


def _checksum_verify(b: PythonEmitter, c: ExternCall) -> str:
    cond, data, cks, algo = c.args
    h = _hash_of(b, algo, data, payload=c.semantics.with_payload)
    b.emit(f"if {b.ex(cond)} and ({h} & {_mask(cks)}) != {b.ex(cks)}: "
           f"PK.{c.semantics.request} = 1")
    return ""


def _checksum_update(b: PythonEmitter, c: ExternCall) -> str:
    cond, data, cks, algo = c.args
    h = _hash_of(b, algo, data, payload=c.semantics.with_payload)
    b.emit(f"if {b.ex(cond)}:")
    b.indent += 1
    b.assign(cks, f"({h} & {_mask(cks)})")
    b.indent -= 1
    return ""


def _clone_type(b: PythonEmitter, e: A.Expression) -> tuple[str, str]:
    """Code of a ``CloneType`` argument (its position, as plain enums compile) and of
    its name for the trace."""
    if isinstance(e, A.MemberExpression) and e.member in CloneType.__members__:
        return repr(int(CloneType[e.member])), repr(e.member)
    code = b.ex(e)
    return code, f"{b.bind('_CloneType', CloneType)}({code}).name"


def _request(b: PythonEmitter, c: ExternCall) -> str:
    sem, a = c.semantics, c.args
    if sem.request == "clone":
        (ctype, type_name), session = _clone_type(b, a[0]), b.ex(a[1])
        fl = b.ex(a[2]) if "index" in sem.params else "-1"
        b.emit(f"PK.clone_type = {ctype}; PK.clone_session = {session}; PK.clone_fl = {fl}")
        b.trace("extern", f"{{'extern': {sem.name!r}, 'type': {type_name}, 'session': {session}}}")
        return ""
    if sem.request == "truncate":
        b.emit(f"PK.truncate = {b.ex(a[0])}")
        return ""
    slot = _FIELD_LIST_SLOT[str(sem.request)]
    b.emit(f"PK.{slot} = {b.ex(a[0]) if 'index' in sem.params else '-1'}")
    b.trace("extern", f"{{'extern': {sem.name!r}}}")
    return ""


def _assert(b: PythonEmitter, c: ExternCall) -> str:
    why = f"{c.semantics.name} failed at {c.node.loc}"
    b.emit(f"if not {b.ex(c.args[0])}: raise DropSignal({why!r})")
    return ""


def _log(b: PythonEmitter, c: ExternCall) -> str:
    values = b.ex(c.args[1]) if len(c.args) > 1 else "()"
    b.emit(f"if tr is not None: tr.append(TE('log', {b.block!r}, "
           f"{{'message': {b.bind('_fmt_msg', _fmt_msg)}({b.ex(c.args[0])}, {values})}}))")
    return ""


def _digest(b: PythonEmitter, c: ExternCall) -> str:
    data = c.args[1]
    q = b.digest_queue(data)
    codes, _ = b.field_list(data)
    b.emit(f"{q}.push(({''.join(code + ', ' for code in codes)}))")
    b.trace("extern", f"{{'extern': 'digest', 'name': {q}.name}}")
    return ""


# ---------------------------------------------------------------- method calls
def _register_read(b: PythonEmitter, c: ExternCall) -> str:
    b.assign(c.args[0], f"{c.obj}.read({b.ex(c.args[1])})")
    return ""


def _register_write(b: PythonEmitter, c: ExternCall) -> str:
    b.emit(f"{c.obj}.write({b.ex(c.args[0])}, {b.ex(c.args[1])})")
    return ""


def _count(b: PythonEmitter, c: ExternCall) -> str:
    b.emit(f"{c.obj}.count({b.ex(c.args[0])}, PK.length)")
    return ""


def _nothing(b: PythonEmitter, c: ExternCall) -> str:
    return ""


def _meter(b: PythonEmitter, c: ExternCall) -> str:
    b.assign(c.args[1], f"{c.obj}.execute({b.ex(c.args[0])}, PK.length, PK.now_us)")
    return ""


def _direct_meter_read(b: PythonEmitter, c: ExternCall) -> str:
    b.assign(c.args[0], f"{c.obj}.color")
    return ""


PYTHON_CALLS: dict[str, PythonCallLowering] = {
    "mark_to_drop": _set_metadata,
    "hash": _hash,
    "random": _random_call,
    **dict.fromkeys(("verify_checksum", "verify_checksum_with_payload"), _checksum_verify),
    **dict.fromkeys(("update_checksum", "update_checksum_with_payload"), _checksum_update),
    **dict.fromkeys(("clone", "clone3", "clone_preserving_field_list", "resubmit",
                     "resubmit_preserving_field_list", "recirculate",
                     "recirculate_preserving_field_list", "truncate"), _request),
    "assert": _assert,
    "assume": _assert,
    "log_msg": _log,
    "digest": _digest,
    "register.read": _register_read,
    "register.write": _register_write,
    "counter.count": _count,
    "direct_counter.count": _nothing,
    "meter.execute_meter": _meter,
    "direct_meter.read": _direct_meter_read,
}
