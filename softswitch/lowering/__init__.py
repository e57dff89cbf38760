"""The target-independent lowered form of a checked program: the instance tree with
control-plane names, tables, actions, extern instances and value sets, shared by the
Python and eBPF back ends and by P4Info (see ``softswitch/BACKEND.md``)."""
from softswitch.lowering.model import (
    LoweredAction,
    LoweredActionRef,
    LoweredBlock,
    LoweredDefault,
    LoweredEntry,
    LoweredExtern,
    LoweredKey,
    LoweredProgram,
    LoweredTable,
    LoweredValueSet,
    value_width,
)
from softswitch.lowering.parsers import LoweredCase, LoweredMatch, LoweredState
from softswitch.lowering.program import lower_program

__all__ = [
    "LoweredAction",
    "LoweredActionRef",
    "LoweredBlock",
    "LoweredCase",
    "LoweredDefault",
    "LoweredEntry",
    "LoweredExtern",
    "LoweredKey",
    "LoweredMatch",
    "LoweredProgram",
    "LoweredState",
    "LoweredTable",
    "LoweredValueSet",
    "lower_program",
    "value_width",
]
