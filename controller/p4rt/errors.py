"""Errors of the P4Runtime client: one hierarchy, each message names the switch, the
object and the bad value.

Why one place: gRPC failures are wrapped exactly once, where the call is made, so the
layers above (fleet, runner, CLI) never see a raw ``grpc.RpcError``.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


class P4rtError(Exception):
    """Base class of every error raised by ``controller.p4rt``."""


class SchemaError(P4rtError):
    """A name or id is not in the P4Info (message carries a "did you mean")."""


class CodecError(P4rtError):
    """A match value or parameter cannot be encoded/decoded for its field."""


class ConnectError(P4rtError):
    """The switch could not be reached, or the stream broke and did not come back."""


class ArbitrationError(P4rtError):
    """This client is not the primary (another controller holds a higher election id)."""


class PipelineError(P4rtError):
    """The switch refused the forwarding pipeline config (P4Info and device config)."""


class RpcError(P4rtError):
    """A unary RPC other than Write failed (Read, Get/SetForwardingPipelineConfig ...)."""

    def __init__(self, message: str, *, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True, frozen=True, kw_only=True)
class UpdateFailure:
    """One refused update of a Write: its index, what it was, and the p4.v1.Error."""

    index: int
    update: str          # formatted update, e.g. "INSERT SwitchIngress.ipv4_lpm dst_addr=10.0.1.0/24 ..."
    code: str            # canonical gRPC code name of the p4.v1.Error
    message: str


class WriteError(P4rtError):
    """A Write was refused; `failures` lists each refused update (OK ones are not listed)."""

    def __init__(self, switch: str, failures: list[UpdateFailure], *, total: int = 0) -> None:
        total = max(total, len(failures))
        lines = [f"switch {switch}: write refused: {len(failures)} of {total} update(s) failed"]
        lines += [f"  update #{f.index} {f.update}: {f.code}: {f.message}" for f in failures]
        super().__init__("\n".join(lines))
        self.switch = switch
        self.failures = failures


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the closest choice, or "" when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
