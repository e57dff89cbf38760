"""P4Runtime values for the server: the shared codec (:mod:`common.p4runtime.values`)
whose refusals become gRPC statuses (INVALID_ARGUMENT, or UNIMPLEMENTED for a type
the switch does not handle), as every other refusal of the server."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from common.p4runtime import values
from softswitch.p4runtime.errors import invalid, unimplemented

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _refusing(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except values.P4ValueError as exc:
            raise (unimplemented if exc.unsupported else invalid)(str(exc)) from None
    return call


decode_bits = _refusing(values.decode_bits)
encode_bits = _refusing(values.encode_bits)
decode_signed = _refusing(values.decode_signed)
encode_signed = _refusing(values.encode_signed)
bitwidth_of = _refusing(values.bitwidth_of)
decode_p4data = _refusing(values.decode_p4data)
encode_p4data = _refusing(values.encode_p4data)

__all__ = ["bitwidth_of", "decode_bits", "decode_p4data", "decode_signed", "encode_bits",
           "encode_p4data", "encode_signed"]
