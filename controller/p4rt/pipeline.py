"""The forwarding pipeline a switch gets: P4Info plus a target-specific device config.

Why one option for the target: the same P4 program runs on softswitch, whose device
config is the P4 source itself (a tar archive of the program's folder with a ``MAIN``
member naming the main file, so ``#include "include/x.p4"`` resolves), and on BMv2,
whose device config is the JSON p4c compiled.  The P4Info comes from a p4c
``--p4info`` file when given, else softswitch builds it from the source; for BMv2
without a JSON, the program is compiled with p4c when p4c is on PATH (:mod:`.p4c`, cached
by content).
"""
from __future__ import annotations

import enum
import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2 as P4I

from .errors import PipelineError
from .p4c import compile_bmv2_cached


class Target(enum.StrEnum):
    SOFTSWITCH = "softswitch"
    BMV2 = "bmv2"


@dataclass(slots=True, frozen=True, kw_only=True)
class PipelineConfig:
    """What SetForwardingPipelineConfig sends; `cookie` identifies it (a content hash)."""

    p4info: P4I.P4Info
    device_config: bytes
    target: Target
    cookie: int
    source: str = ""
    p4info_bytes: bytes = b""
    """``p4info`` serialised once, here: switch threads push these bytes instead of
    copying the shared message (the pure-Python protobuf runtime fills in unset
    sub-messages on read, so copying it while another thread reads it can fail)."""

    def __post_init__(self) -> None:
        if not self.p4info_bytes:
            object.__setattr__(self, "p4info_bytes", self.p4info.SerializeToString())


def read_p4info(path: str | Path) -> P4I.P4Info:
    """A P4Info file in text (.txt/.txtpb/.p4info) or binary (.bin/.pb) form."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise PipelineError(f"P4Info file {p}: cannot read: {exc.strerror}") from None
    info = P4I.P4Info()
    try:
        if p.suffix in (".bin", ".pb"):
            info.ParseFromString(data)
        else:
            text_format.Parse(data.decode("utf-8"), info)
    except Exception as exc:  # noqa: BLE001 - protobuf raises several kinds
        raise PipelineError(f"P4Info file {p}: not a P4Info: {exc}") from None
    return info


def softswitch_device_config(program: str | Path) -> bytes:
    """A deterministic tar of every .p4 file under the program's folder, plus MAIN."""
    main = Path(program)
    if not main.is_file():
        raise PipelineError(f"P4 program {main}: no such file")
    root = main.parent
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        def add(name: str, data: bytes) -> None:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            tf.addfile(ti, io.BytesIO(data))
        add("MAIN", main.name.encode())
        for f in sorted(root.rglob("*.p4")):
            add(f.relative_to(root).as_posix(), f.read_bytes())
    return buf.getvalue()


def build_p4info_from_source(program: str | Path) -> P4I.P4Info:
    """P4Info of a P4 program as softswitch builds it for every target (P4 errors ->
    PipelineError)."""
    from softswitch.errors import SoftswitchError
    from softswitch.frontend.errors import P4Error
    from softswitch.frontend.load import load_program
    from softswitch.objects import program_objects
    try:
        return program_objects(load_program(program)).p4info()
    except (SoftswitchError, P4Error, OSError) as exc:
        raise PipelineError(f"P4 program {program}: does not compile: {exc}") from None


def _cookie(p4info: P4I.P4Info, device_config: bytes) -> int:
    h = hashlib.sha256(p4info.SerializeToString(deterministic=True) + device_config)
    return int.from_bytes(h.digest()[:8], "big") >> 1   # fits int64 too


def load_pipeline(*, target: Target | str, program: str | Path | None = None,
                  p4info: str | Path | None = None, bmv2_json: str | Path | None = None) -> PipelineConfig:
    """Build the pipeline for `target` from the files given (see module docstring)."""
    target = Target(target)
    if target is Target.SOFTSWITCH:
        if program is None:
            raise PipelineError("target softswitch: give the P4 program (.p4)")
        config = softswitch_device_config(program)
        info = read_p4info(p4info) if p4info else build_p4info_from_source(program)
        source = str(program)
    else:
        if (bmv2_json is None or p4info is None) and program is not None:
            bmv2_json, p4info = compile_bmv2_cached(program)
        if bmv2_json is None or p4info is None:
            raise PipelineError("target bmv2: give the p4c JSON and the P4Info file "
                                "(p4c --target bmv2 --arch v1model --p4runtime-files X.p4info.txtpb), "
                                "or the P4 program with p4c on PATH")
        try:
            config = Path(bmv2_json).read_bytes()
        except OSError as exc:
            raise PipelineError(f"BMv2 JSON {bmv2_json}: cannot read: {exc.strerror}") from None
        info = read_p4info(p4info)
        source = str(bmv2_json)
    return PipelineConfig(p4info=info, device_config=config, target=target,
                          cookie=_cookie(info, config), source=source)
