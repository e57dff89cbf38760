"""The forwarding pipeline a switch gets: P4Info plus a target-specific device config.

Why one option for the target: the same P4 program runs on softswitch, whose device
config is the P4 source itself (a tar archive of the program's folder with a ``MAIN``
member naming the main file, so ``#include "include/x.p4"`` resolves), and on BMv2,
whose device config is the JSON p4c compiled.  The P4Info comes from a p4c
``--p4info`` file when given, else softswitch builds it from the source; for BMv2
without a JSON, the program is compiled with p4c (`compile_bmv2`) when p4c is on PATH.
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
    """P4Info of a P4 program as softswitch compiles it (P4 errors -> PipelineError)."""
    from softswitch.api import Switch
    from softswitch.errors import SoftswitchError
    from softswitch.frontend.errors import P4Error
    from softswitch.p4info import build_p4info
    try:
        return build_p4info(Switch.from_file(program).program.checked)
    except (SoftswitchError, P4Error, OSError) as exc:
        raise PipelineError(f"P4 program {program}: does not compile: {exc}") from None


def compile_bmv2(program: str | Path, out_dir: str | Path | None = None) -> tuple[Path, Path]:
    """Compile `program` with p4c for BMv2 (v1model): (JSON, P4Info text file).  The
    files go to `out_dir` (default: a fresh temporary folder)."""
    import shutil
    import subprocess
    import tempfile
    p4c = shutil.which("p4c") or shutil.which("p4c-bm2-ss")
    if p4c is None:
        raise PipelineError(f"target bmv2: p4c is not on PATH to compile {program}; install p4c or "
                            f"give --bmv2-json and --p4info")
    src = Path(program)
    if not src.is_file():
        raise PipelineError(f"P4 program {src}: no such file")
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="p4c-bmv2-"))
    out.mkdir(parents=True, exist_ok=True)
    js, info = out / f"{src.stem}.json", out / f"{src.stem}.p4info.txtpb"
    argv = [p4c, "--target", "bmv2", "--arch", "v1model", "-o", str(out),
            "--p4runtime-files", str(info), str(src)]
    if Path(p4c).name == "p4c-bm2-ss":
        argv = [p4c, "--arch", "v1model", "-o", str(js), "--p4runtime-files", str(info), str(src)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PipelineError(f"p4c on {src}: {exc}") from None
    if r.returncode != 0 or not js.is_file():
        raise PipelineError(f"p4c on {src} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
    return js, info


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
            bmv2_json, p4info = compile_bmv2(program)
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
