"""Errors of the P4Runtime layer, each carrying the gRPC status code it maps to.

Why one class with a code instead of a class per code: the server turns every
refusal into exactly one ``google.rpc.Status`` (or one ``p4.v1.Error`` per update),
and the code is the only thing that differs. `from_runtime` is the single place
where the runtime API's `RuntimeErrorCode` enum becomes a gRPC code, as BMv2 maps
its bm_sim errors once at the PI edge.
"""
from __future__ import annotations

import grpc

from softswitch.errors import RuntimeApiError, RuntimeErrorCode, SoftswitchError

_RUNTIME_TO_GRPC: dict[RuntimeErrorCode, grpc.StatusCode] = {
    RuntimeErrorCode.DUPLICATE_ENTRY: grpc.StatusCode.ALREADY_EXISTS,
    RuntimeErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    RuntimeErrorCode.BAD_MATCH_KEY: grpc.StatusCode.INVALID_ARGUMENT,
    RuntimeErrorCode.BAD_ACTION: grpc.StatusCode.INVALID_ARGUMENT,
    RuntimeErrorCode.BAD_ACTION_PARAMS: grpc.StatusCode.INVALID_ARGUMENT,
    RuntimeErrorCode.BAD_PRIORITY: grpc.StatusCode.INVALID_ARGUMENT,
    RuntimeErrorCode.TABLE_FULL: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RuntimeErrorCode.INDEX_OUT_OF_RANGE: grpc.StatusCode.INVALID_ARGUMENT,
    RuntimeErrorCode.BAD_VALUE: grpc.StatusCode.INVALID_ARGUMENT,
    RuntimeErrorCode.CONST_TABLE: grpc.StatusCode.PERMISSION_DENIED,
    RuntimeErrorCode.IN_USE: grpc.StatusCode.FAILED_PRECONDITION,
    RuntimeErrorCode.UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
}


class P4RuntimeError(SoftswitchError):
    """A P4Runtime request (or one update of it) was refused; nothing was changed."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_runtime(cls, exc: RuntimeApiError, where: str = "") -> P4RuntimeError:
        code = _RUNTIME_TO_GRPC.get(exc.code, grpc.StatusCode.UNKNOWN)
        return cls(code, f"{where}: {exc}" if where else str(exc))


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


class DeviceError(P4RuntimeError):
    """The device refused an operation (bad pipeline, reconcile impossible, bad packet-out)."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT) -> None:
        super().__init__(code, message)
