"""Where the run-time object of an extern instance comes from.

An architecture says what its externs do (``ExternSemantics``); which object an
instance of an extern type is (a `Register`, a `Counter`, an `ActionProfile` ...) is
the same for every target, so it is found here, one table per architecture family
(``v1model.py``), registered by the architecture's class. Makers an architecture
object gained with `Architecture.add_extern` (``python_instance=``: a target's own
externs) come first.
"""
from __future__ import annotations

from collections.abc import Mapping

from softswitch.architecture import Architecture, PythonInstanceLowering
from softswitch.objects.v1model import V1MODEL_INSTANCES
from softswitch.v1model.architecture import V1Model

InstanceMaker = PythonInstanceLowering   # InstanceRequest -> the run-time object

MAKERS: dict[type[Architecture], Mapping[str, InstanceMaker]] = {
    V1Model: V1MODEL_INSTANCES,
}


def instance_maker(arch: Architecture, type_name: str) -> InstanceMaker | None:
    """What creates the run-time object of an instance of extern type `type_name` on
    `arch` (None: the architecture has no such extern type)."""
    own = arch.python_instance(type_name)
    if own is not None:
        return own
    for cls in type(arch).__mro__:
        family = MAKERS.get(cls)
        if family is not None:
            return family.get(type_name)
    return None
