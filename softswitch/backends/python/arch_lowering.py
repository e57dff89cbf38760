"""Where the Python back end finds an architecture's externs lowered to Python.

An architecture (``softswitch.v1model``) says what its externs do (`ExternSemantics`);
how each becomes Python is this back end's business, one module per architecture
(``v1model.py``), registered below by the architecture's class. So the architecture
imports no back end, and a second back end (``backends/ebpf``) lowers the same
semantics its own way. Lowerings an architecture object gained with
`Architecture.add_extern` (a target's own externs) come first. The run-time objects
of extern instances are no back end's: `softswitch.objects.instance_maker`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from softswitch.architecture import Architecture, PythonCallLowering
from softswitch.backends.python import v1model as v1model_python
from softswitch.v1model.architecture import V1Model


@dataclass(slots=True, frozen=True)
class ArchLowering:
    """The Python lowerings of one architecture family, and how its compiled code
    is made to compute a control-plane-configured hash."""

    calls: Mapping[str, PythonCallLowering]
    rebind_hash: Callable[[dict[str, Any], str, Callable[[bytes], int]], None] | None = None


LOWERINGS: dict[type[Architecture], ArchLowering] = {
    V1Model: ArchLowering(calls=v1model_python.PYTHON_CALLS,
                          rebind_hash=v1model_python.rebind_hash),
}


def _family(arch: Architecture) -> ArchLowering | None:
    for cls in type(arch).__mro__:
        found = LOWERINGS.get(cls)
        if found is not None:
            return found
    return None


def python_call(arch: Architecture, name: str) -> PythonCallLowering | None:
    """The Python lowering of extern function or method `name` on `arch` (None: none)."""
    own = arch.python_call(name)
    if own is not None:
        return own
    family = _family(arch)
    return family.calls.get(name) if family is not None else None


def rebind_hash(arch: Architecture, env: dict[str, Any], algorithm: str,
                fn: Callable[[bytes], int]) -> None:
    """Make the code compiled into `env` compute `algorithm` (one of the architecture's
    `custom_hashes`) with `fn` from its next call on (BMv2's set_crc32_parameters)."""
    family = _family(arch)
    if algorithm not in arch.custom_hashes or family is None or family.rebind_hash is None:
        raise ValueError(f"architecture {arch.name}: no configurable hash {algorithm}")
    family.rebind_hash(env, algorithm, fn)
