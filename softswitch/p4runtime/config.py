"""p4_device_config for softswitch: the P4 source itself, one file or an archive.

Why source: softswitch compiles P4_16 at load time, so the "device config" is
what the user wrote. Two forms are told apart by their first bytes:

* plain text: one .p4 file (what p4runtime-shell sends when given a .p4 file);
* an archive (tar, tar.gz or zip) of several files. The main file is the one
  named by a member ``MAIN`` (its text is the path), else ``main.p4``, else the
  only ``.p4`` file that instantiates a package (``... main;``).

The P4Info sent with the config must describe the same program: every object the
program has must be in it under the same id and name, and the other way round.
"""
from __future__ import annotations

import io
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from p4.config.v1 import p4info_pb2 as P4I

from softswitch.errors import SoftswitchError
from softswitch.frontend.errors import P4Error
from softswitch.p4runtime.errors import invalid, unimplemented

MAX_ARCHIVE_BYTES = 64 << 20
_MAIN_DECL = re.compile(rb"\)\s*main\s*;")


@dataclass(slots=True, frozen=True, kw_only=True)
class SourceFiles:
    """The P4 sources of a device config: relative path -> bytes, and the main file."""

    files: dict[str, bytes]
    main: str
    archive: str  # "text", "tar" or "zip"


def _safe_name(name: str) -> str | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts:
        raise invalid(f"p4_device_config: archive member {name!r} escapes the archive")
    clean = str(p)
    return None if clean in ("", ".") else clean


def decode_device_config(data: bytes) -> SourceFiles:
    """Tell the config's form apart and return its files (INVALID_ARGUMENT if neither)."""
    if not data:
        raise invalid("p4_device_config is empty: send the P4 source (a .p4 file or an archive)")
    files: dict[str, bytes] = {}
    if data[:4] == b"PK\x03\x04":
        kind = "zip"
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for zi in zf.infolist():
                    name = _safe_name(zi.filename)
                    if name and not zi.is_dir():
                        if zi.file_size > MAX_ARCHIVE_BYTES:
                            raise invalid(f"p4_device_config: member {name!r} is too large")
                        files[name] = zf.read(zi)
        except zipfile.BadZipFile as exc:
            raise invalid(f"p4_device_config: bad zip archive: {exc}") from None
    elif data[:2] == b"\x1f\x8b" or (len(data) > 262 and data[257:262] == b"ustar"):
        kind = "tar"
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
                for ti in tf.getmembers():
                    name = _safe_name(ti.name)
                    if name and ti.isfile():
                        if ti.size > MAX_ARCHIVE_BYTES:
                            raise invalid(f"p4_device_config: member {name!r} is too large")
                        fh = tf.extractfile(ti)
                        files[name] = fh.read() if fh is not None else b""
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise invalid(f"p4_device_config: bad tar archive: {exc}") from None
    else:
        if data.lstrip()[:1] == b"{":
            raise unimplemented("p4_device_config looks like a BMv2 JSON file; softswitch runs P4 "
                                "source: send the .p4 file (or an archive of the sources)")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise invalid(f"p4_device_config is neither P4 source text (not UTF-8 at byte "
                          f"{exc.start}) nor a tar/zip archive") from None
        return SourceFiles(files={"program.p4": data}, main="program.p4", archive="text")
    return SourceFiles(files=files, main=_find_main(files), archive=kind)


def _find_main(files: dict[str, bytes]) -> str:
    if "MAIN" in files:
        main = files["MAIN"].decode("utf-8", "replace").strip()
        if main not in files:
            raise invalid(f"p4_device_config: MAIN names {main!r}, which is not in the archive "
                          f"(have {sorted(files)})")
        return main
    if "main.p4" in files:
        return "main.p4"
    p4s = sorted(n for n in files if n.endswith(".p4"))
    with_main = [n for n in p4s if _MAIN_DECL.search(files[n])]
    if len(with_main) == 1:
        return with_main[0]
    raise invalid("p4_device_config: cannot tell the main file of the archive: add a member MAIN "
                  f"naming it (candidates: {with_main or p4s or 'no .p4 files'})")


def build_switch(src: SourceFiles, build: Callable[..., Any], *,
                 name: str = "softswitch") -> tuple[Any, P4I.P4Info]:
    """Compile the sources with `build` (the device's `build_switch`: its target's
    compiler); P4 errors become INVALID_ARGUMENT with the compiler's message."""
    with tempfile.TemporaryDirectory(prefix="p4rt-config-") as tmp:
        root = Path(tmp)
        for rel, content in src.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        try:
            sw = build(root / src.main, name=name)
            info = sw.program.p4info()
        except P4Error as exc:
            text = exc.render() if hasattr(exc, "render") else str(exc)
            raise invalid(f"p4_device_config: the P4 program does not compile: "
                          f"{text.replace(tmp + '/', '')}") from None
        except SoftswitchError as exc:
            raise invalid(f"p4_device_config: the P4 program cannot run on softswitch: "
                          f"{str(exc).replace(tmp + '/', '')}") from None
        except RecursionError:
            raise invalid("p4_device_config: the P4 program nests too deeply") from None
    return sw, info


_KINDS = ("tables", "actions", "counters", "direct_counters", "meters", "direct_meters",
          "registers", "digests", "controller_packet_metadata", "value_sets", "action_profiles")


def compare_p4info(sent: P4I.P4Info, built: P4I.P4Info) -> None:
    """INVALID_ARGUMENT naming the first object whose id/name/shape differ."""
    for kind in _KINDS:
        got = {o.preamble.id: o for o in getattr(sent, kind)}
        want = {o.preamble.id: o for o in getattr(built, kind)}
        for oid, o in want.items():
            if oid not in got:
                by_name = [g for g in got.values() if g.preamble.name == o.preamble.name]
                hint = (f"; the P4Info gives it id {by_name[0].preamble.id:#x}" if by_name else
                        "; it is missing from the P4Info")
                raise invalid(f"P4Info does not match the P4 program: {kind[:-1]} "
                              f"{o.preamble.name!r} has id {oid:#x} in the program{hint}")
            g = got[oid]
            if g.preamble.name != o.preamble.name:
                raise invalid(f"P4Info does not match the P4 program: {kind[:-1]} id {oid:#x} is "
                              f"{g.preamble.name!r} in the P4Info but {o.preamble.name!r} in the program")
            _compare_parts(kind, g, o)
        extra = sorted(set(got) - set(want))
        if extra:
            raise invalid(f"P4Info does not match the P4 program: {kind[:-1]} "
                          f"{got[extra[0]].preamble.name!r} (id {extra[0]:#x}) is not in the program")


def _compare_parts(kind: str, g: Any, o: Any) -> None:
    name = o.preamble.name
    if kind == "tables":
        fields_g = [(f.id, f.name, f.bitwidth, f.match_type, f.other_match_type) for f in g.match_fields]
        fields_o = [(f.id, f.name, f.bitwidth, f.match_type, f.other_match_type) for f in o.match_fields]
        if fields_g != fields_o:
            raise invalid(f"P4Info does not match the P4 program: table {name!r} match fields "
                          f"differ: P4Info {fields_g}, program {fields_o}")
        if sorted(r.id for r in g.action_refs) != sorted(r.id for r in o.action_refs):
            raise invalid(f"P4Info does not match the P4 program: table {name!r} action list differs")
    elif kind == "actions":
        params_g = [(p.id, p.name, p.bitwidth) for p in g.params]
        params_o = [(p.id, p.name, p.bitwidth) for p in o.params]
        if params_g != params_o:
            raise invalid(f"P4Info does not match the P4 program: action {name!r} parameters "
                          f"differ: P4Info {params_g}, program {params_o}")
    elif kind == "controller_packet_metadata":
        meta_g = [(m.id, m.name, m.bitwidth) for m in g.metadata]
        meta_o = [(m.id, m.name, m.bitwidth) for m in o.metadata]
        if meta_g != meta_o:
            raise invalid(f"P4Info does not match the P4 program: controller header {name!r} "
                          f"fields differ: P4Info {meta_g}, program {meta_o}")
    elif kind in ("counters", "meters", "registers") and g.size != o.size:
        raise invalid(f"P4Info does not match the P4 program: {kind[:-1]} {name!r} has size "
                      f"{g.size} in the P4Info but {o.size} in the program")
