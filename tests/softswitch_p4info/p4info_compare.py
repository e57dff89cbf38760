"""Compare two P4Info messages entity by entity and say what differs by entity name
(``actions 'Ing.drop': params differ ...``), so a failing golden test names the table
or action at fault instead of dumping two whole files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2 as P4I


def read_p4info(path: Path) -> P4I.P4Info:
    return text_format.Parse(path.read_text(), P4I.P4Info())


def _short(msg: Any) -> str:
    return " ".join(text_format.MessageToString(msg).split())


def _show(value: Any, repeated: bool) -> str:
    if hasattr(value, "ListFields"):
        return _short(value)
    if repeated:
        return "[" + "; ".join(_short(x) if hasattr(x, "ListFields") else repr(x) for x in value) + "]"
    return repr(value)


def _field_differences(want: Any, got: Any) -> str:
    parts = []
    for fd in want.DESCRIPTOR.fields:
        a, b = getattr(want, fd.name), getattr(got, fd.name)
        if a != b:
            rep = fd.label == fd.LABEL_REPEATED
            parts.append(f"{fd.name}: expected {_show(a, rep) or '(none)'}, got {_show(b, rep) or '(none)'}")
    return "; ".join(parts)


def differences(want: P4I.P4Info, got: P4I.P4Info) -> list[str]:
    """What ``got`` has that ``want`` does not, or not the same way, one line per entity
    (and one per kind whose order differs); empty when the messages are equal."""
    out: list[str] = []
    for fd in P4I.P4Info.DESCRIPTOR.fields:
        a, b = getattr(want, fd.name), getattr(got, fd.name)
        if fd.label != fd.LABEL_REPEATED:
            if want.HasField(fd.name) != got.HasField(fd.name):
                out.append(f"{fd.name}: expected {'present' if want.HasField(fd.name) else 'absent'}, "
                           f"got {'present' if got.HasField(fd.name) else 'absent'}")
            elif fd.name == "type_info":
                out += _type_info_differences(a, b)
            elif a != b:
                out.append(f"{fd.name}: {_field_differences(a, b)}")
            continue
        by_name_a = {x.preamble.name: x for x in a}
        by_name_b = {x.preamble.name: x for x in b}
        for name in sorted(set(by_name_a) | set(by_name_b)):
            x, y = by_name_a.get(name), by_name_b.get(name)
            if y is None:
                out.append(f"{fd.name} {name!r}: missing")
            elif x is None:
                out.append(f"{fd.name} {name!r}: not expected ({_short(y)})")
            elif x != y:
                out.append(f"{fd.name} {name!r}: {_field_differences(x, y)}")
        order_a = [x.preamble.name for x in a]
        order_b = [x.preamble.name for x in b]
        if sorted(order_a) == sorted(order_b) and order_a != order_b:
            out.append(f"{fd.name}: order expected {order_a}, got {order_b}")
    return out


def _type_info_differences(want: Any, got: Any) -> list[str]:
    out = []
    for fd in want.DESCRIPTOR.fields:
        a, b = getattr(want, fd.name), getattr(got, fd.name)
        if a == b:
            continue
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            for key in sorted(set(a) | set(b)):
                if key not in b:
                    out.append(f"type_info.{fd.name} {key!r}: missing")
                elif key not in a:
                    out.append(f"type_info.{fd.name} {key!r}: not expected")
                elif a[key] != b[key]:
                    out.append(f"type_info.{fd.name} {key!r}: expected {_short(a[key])}, got {_short(b[key])}")
        else:
            out.append(f"type_info.{fd.name}: expected {_short(a)}, got {_short(b)}")
    return out
