"""v1model externs at run time: hashes, counters, meters, registers, digests.

Each extern is a plain object the compiled program holds a reference to; the
runtime API reads and writes the same objects, so there is one copy of state.
"""
from softswitch.externs.hashes import HASH_ALGORITHMS, compute_hash, fields_to_bytes
from softswitch.externs.stateful import (
    Color,
    Counter,
    CounterType,
    DigestQueue,
    Meter,
    MeterConfig,
    MeterState,
    Register,
)

__all__ = [
    "HASH_ALGORITHMS",
    "Color",
    "Counter",
    "CounterType",
    "DigestQueue",
    "Meter",
    "MeterConfig",
    "MeterState",
    "Register",
    "compute_hash",
    "fields_to_bytes",
]
